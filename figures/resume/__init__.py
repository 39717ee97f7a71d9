"""Resume semantics figures (Resume Means Resume): one module per figure."""
