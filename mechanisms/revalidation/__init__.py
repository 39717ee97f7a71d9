"""Decision-revalidation mechanisms (ATR paper, arXiv 2609.08015): name -> ``module:Class``.

Protocol: ``validate(txn, store) -> Validation`` (:mod:`mechanisms.revalidation.base`).
A shipped mechanism is one module here plus one line in :data:`REGISTRY`.
"""
REGISTRY: dict[str, str] = {
    "NoCheck": "mechanisms.revalidation.nocheck:NoCheck",
    "VersionAbort": "mechanisms.revalidation.version_abort:VersionAbort",
    "FullScan": "mechanisms.revalidation.full_scan:FullScan",
    "ATR": "mechanisms.revalidation.atr:ATR",
}
