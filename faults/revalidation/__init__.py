"""Decision revalidation faults: dependency omission (and conservative linking), race interleavings."""
