"""SSI with the other two opaque-resource policies: ``SSI+capture`` and ``SSI+taint`` (paper §4).

An opaque resource cannot be versioned (a web tool, a third-party API): the
registry retains nothing, only its live behaviour is reachable, so S1
cannot be honoured by re-resolving.  ``SSI`` (policy ``abort``) refuses it;
``SSI+capture`` records the first response in the manifest and replays it
(stability at the price of serving a stale answer); ``SSI+taint`` serves it
live every time and taints the manifest, so the anomaly still happens but
the output is marked and a merge of a tainted branch is refused.
"""
from mechanisms.isolation.ssi import SSI


class CaptureSSI(SSI):
    name = "SSI+capture"

    def __init__(self, opaque_policy: str = "capture"):
        super().__init__(opaque_policy)


class TaintSSI(SSI):
    name = "SSI+taint"

    def __init__(self, opaque_policy: str = "taint"):
        super().__init__(opaque_policy)
