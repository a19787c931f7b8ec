"""The notebook surface: a namespace's tables as a private DuckDB database for SQL (``sql.py``),
Parquet exports (``export.py``) and belief timelines as pictures (``timeline.py``)."""
