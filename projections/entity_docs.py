"""Entity name -> the documents of a namespace's recall index that name it."""

from __future__ import annotations

from array import array

import numpy as np

__all__ = ["EntityDocs"]


class EntityDocs:
    """Each entity's documents, in document order (a document once per naming).

    Loaded in bulk (:meth:`load`) as one column of documents ordered by entity, not an array
    per entity: an entity's run is cut out when it is asked for, so building a big namespace's
    index costs a sort, not a Python object per entity. Documents added afterwards are kept per
    name and follow the loaded ones."""

    def __init__(self) -> None:
        self._names: list[str] = []  # the loaded entities, in the order of their runs
        self._code: dict[str, int] | None = {}  # name -> run, made when first needed
        self._bounds = np.zeros(1, dtype=np.int64)  # run r is _docs[_bounds[r]:_bounds[r + 1]]
        self._docs = np.zeros(0, dtype=np.int64)
        self._added: dict[str, array[int]] = {}

    def load(self, names: list[str], bounds: np.ndarray, docs: np.ndarray) -> None:
        """Fill an empty index from every naming, by entity: ``names[r]`` (distinct) is named
        by documents ``docs[bounds[r]:bounds[r + 1]]`` (ascending). ``docs`` is kept as it is
        (any integer type): do not change it."""
        if len(self._docs) or self._added:
            raise ValueError("EntityDocs.load fills an empty index only")
        if len(bounds) != len(names) + 1:
            raise ValueError("EntityDocs.load takes one run per name")
        self._names = names
        self._code = None
        self._bounds = np.asarray(bounds, dtype=np.int64)
        self._docs = np.asarray(docs)
        if self._docs.flags.writeable:
            self._docs = self._docs.view()
            self._docs.setflags(write=False)  # get() hands out views of it

    def append(self, name: str, doc: int) -> None:
        """Record that document ``doc`` (the newest) names ``name``."""
        docs = self._added.get(name)
        if docs is None:
            docs = self._added[name] = array("q")
        docs.append(doc)

    def get(self, name: str) -> np.ndarray | None:
        """The documents naming ``name``, ascending (read-only); None if none does."""
        run = self._runs().get(name)
        added = self._added.get(name)
        if run is None:
            return None if added is None else np.array(added, dtype=np.int64)
        loaded = self._docs[self._bounds[run] : self._bounds[run + 1]]
        if added is None:
            return loaded
        return np.concatenate([loaded, np.array(added, dtype=np.int64)])

    def __contains__(self, name: object) -> bool:
        return name in self._runs() or name in self._added

    def __bool__(self) -> bool:
        return bool(self._names) or bool(self._added)

    def names(self) -> set[str]:
        """Every entity some document names."""
        return set(self._names) | self._added.keys()

    def as_dict(self) -> dict[str, list[int]]:
        """Entity -> its documents, as plain values (what two equal indexes agree on)."""
        out: dict[str, list[int]] = {}
        for name in sorted(self.names()):
            docs = self.get(name)
            out[name] = [] if docs is None else docs.tolist()
        return out

    def _runs(self) -> dict[str, int]:
        if self._code is None:
            self._code = dict(zip(self._names, range(len(self._names)), strict=True))
        return self._code
