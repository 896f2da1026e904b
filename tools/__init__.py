"""Developer tools of remat-oracle (not installed with the package): the
documentation generator, tools/gen_docs/."""
