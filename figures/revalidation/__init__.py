"""Decision revalidation figures (ATR paper): one module per figure."""
