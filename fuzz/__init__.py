"""remat-oracle's fuzzer: Hypothesis strategies for spec programs, the
properties they are checked against (`pytest fuzz/`), and the campaign CLI
(`remat-oracle fuzz`)."""
