"""Sphinx configuration; built in the test suite with warnings as errors."""

project = "jaxrank"
author = "jaxrank developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax", "myst_nb"]
napoleon_google_docstring = True
napoleon_numpy_docstring = False
autodoc_typehints = "none"
autodoc_member_order = "bysource"
exclude_patterns = ["_build", "screenshot.sh", "notebooks/.ipynb_checkpoints"]
# myst-nb reads the Markdown pages (it includes myst-parser) and the notebooks of
# notebooks/ (docs/notebooks is a link to it).
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
myst_heading_anchors = 4  # GitHub-style anchors, as the pages link to their sections
# The tutorials are shown with the outputs stored in them: the build stays fast and needs no
# kernel. tests/test_notebook.py executes every notebook (at small sizes, JAXRANK_QUICK=1).
nb_execution_mode = "off"
nb_render_markdown_format = "myst"  # the tables the notebooks display (CommonMark has none)
html_theme = "sphinx_book_theme"  # the theme of optax, flax and JAX's own docs
html_title = "jaxrank"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "navigation_with_keys": False,
}
suppress_warnings = ["config.cache"]
