"""Resume semantics (Resume Means Resume, arXiv 2608.03836): its experiments and their side effects: the fork server, forked calls, the racer pool, fault cells."""
