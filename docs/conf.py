"""Sphinx configuration; built in the test suite with warnings as errors."""

project = "jaxrank"
author = "jaxrank developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
exclude_patterns = ["_build", "*.md"]
html_theme = "alabaster"
suppress_warnings = ["config.cache"]
