"""Time: every time argument (``arguments.py``: ISO 8601 and spoken times, one parser) and the
time expressions recall finds in a query (``expressions.py``: "last summer", "in March 2023")."""
