"""Griffe extension: stoker's docstrings, written for ``help()`` and doctests, as Markdown.

Two habits of the source docstrings render badly in the generated reference, and this
extension rewrites them before each docstring is parsed (the source files are left as
they are):

* Doctests sit under ``Example:``. griffe's Google parser knows only the plural
  ``Examples:`` as an examples section and would render the singular as an admonition
  of plain Markdown, where ``>>>`` lines lose their code formatting and ``[4, 4, 2]``
  reads as a link. The heading is renamed.
* Cross-references use Sphinx roles (``:class:`~stoker.Dataset```,
  ``:func:`releases_gil```). Markdown would print the role and the backticks as
  text; they become code spans showing the name as Sphinx would (the last component
  after ``~``).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)
_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|exc|data|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    short, target = match[1], match[2]
    return f"`{target.rsplit('.', 1)[-1] if short else target}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` with Markdown-friendly examples headings and references.

    Example:
        >>> rewrite("See :class:`~stoker.Dataset` and :func:`stoker.range`.")
        'See `Dataset` and `stoker.range`.'
    """
    return _ROLE.sub(_role, _HEADING.sub(r"\1Examples:", text))


class StokerDocstrings(griffe.Extension):
    """Apply :func:`rewrite` to every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Griffe event: an object was loaded (module, class, function or attribute)."""
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
