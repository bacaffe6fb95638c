"""Sphinx configuration; built in the test suite with warnings as errors."""

project = "jaxrank"
author = "jaxrank developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "myst_parser"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
exclude_patterns = ["_build"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 4  # GitHub-style anchors, as the pages link to their sections
html_theme = "alabaster"
suppress_warnings = ["config.cache"]
