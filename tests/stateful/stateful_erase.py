"""The stateful test's erase rule (tests/stateful/test_stateful.py): erasures in the same run as
every other write, held to the model's erase (tests/stateful/model.py)."""

from __future__ import annotations

from hypothesis import event
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, rule

from tests.stateful.model import Op
from tests.stateful.stateful_support import elsewhere

facts = Bundle("facts")  # the machine's bundle (bundles are found by name)


class EraseRules:
    """Erase a fact's whole chain, or every chain of its subject."""

    @rule(fact=facts, other=elsewhere, by_subject=st.booleans())
    def erase(self, fact, other, by_subject):
        ns, fid = self.ns_for(fact, other), fact[1]
        expected, versions = self.model.erase_plan(ns, fid, by_subject)
        if by_subject:
            subject = "" if expected == "FactNotFound" else self.model.facts()[fid].subject
            if not subject:
                return  # nothing to name it by (another namespace's, or erased): test_erasure
        m = self.m(ns)

        def call():
            if by_subject:
                return m.erase(subject=subject, reason="asked")
            return m.erase(fact=fid, reason="asked")

        if expected is not None:
            self._refused(expected, call)
            return
        receipt = call()
        event(f"erase by {'subject' if by_subject else 'fact'}: {len(versions)} version(s)")
        assert list(receipt.fact_ids) == versions
        self._logged(Op("erase", receipt.seq, self.tx_now(), ns, fid, erased=tuple(versions)))
