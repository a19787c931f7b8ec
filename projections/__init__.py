"""Projections: the state derived from the event log (the fold, the event columns, the recall
indexes), its checkpoint, and the SQL tables made from it."""
