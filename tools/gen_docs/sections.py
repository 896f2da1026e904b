"""Generated sections of a hand-written page: the text between
`<!-- BEGIN GENERATED: name -->` and `<!-- END GENERATED: name -->`."""
from __future__ import annotations

import re

_SECTION = re.compile(r"(<!-- BEGIN GENERATED: ([\w-]+) -->\n)(.*?)(<!-- END GENERATED: \2 -->)", re.S)


def fill_sections(text: str, sections: dict[str, str]) -> str:
    """Replace the body of every marked section; every section must be marked once."""
    seen = []

    def sub(m):
        name = m.group(2)
        if name not in sections:
            raise KeyError(f"unknown generated section {name!r}; known: {sorted(sections)}")
        seen.append(name)
        return m.group(1) + sections[name].rstrip() + "\n" + m.group(4)
    new = _SECTION.sub(sub, text)
    missing = sorted(set(sections) - set(seen))
    if missing:
        raise KeyError(f"docs/policies.md lacks the generated section(s) {missing}")
    return new
