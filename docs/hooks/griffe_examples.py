"""Griffe extension: stoker's ``Example:`` docstring sections render as code examples.

stoker's docstrings head their doctests ``Example:`` (one short example each). The
Google parser of griffe knows only the plural ``Examples:`` as an examples section and
would render the singular as an admonition of plain Markdown, where ``>>>`` lines lose
their code formatting and ``[4, 4, 2]`` reads as a link. This extension renames the
heading before the docstring is parsed; the source files are left as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` section headings to ``Examples:`` in every loaded docstring."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Griffe event: an object was loaded (module, class, function or attribute)."""
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
