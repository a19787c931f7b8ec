"""Embedding a store's facts in the background: the worker thread (``worker.py``) and which
worker a Memory uses, how facts are embedded and checked against their namespace
(``facts.py``). The embedders themselves are plug-ins in :mod:`hmem.embedders`."""
