"""The documentation runs, is fresh, and links where it says.

1. Every ```python block of docs/*.md and README.md runs. A block that
   contains `>>>` is a doctest (NORMALIZE_WHITESPACE): its output must be
   what the page shows; any other block is exec'd. The blocks of one file
   run in order in one namespace, so later blocks use earlier names. A
   block opts out only with an explicit info-string marker (```python
   no-run), and at most MAX_NO_RUN blocks in all may do so. Blocks that
   need JAX (`import jax`, `import oracle`) may only be in the pages about
   JAX: oracle.md, fuzzing.md and historic_bugs.md. The generated pages (GENERATED_PAGES)
   are checked by 2 instead; their python blocks are JAX snippets quoted
   from oracle/divergences.py (they toggle jax_remat3, so they are not run
   in this process): they are compiled.
   Each file runs with the rule tables of spec/core.py restored afterwards,
   so a page may register a primitive (fuzzing.md's worked example does)
   without leaking it into other tests.
2. The generated pages and sections are fresh (tools/gen_docs.py --check,
   in-process).
3. Relative links resolve: to files that exist and, for `#anchor`s, to a
   heading (or an `<a id>`) of the target page; every page of docs/ is
   reachable from README.md.
"""
from __future__ import annotations

import contextlib
import doctest
import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
FILES = [ROOT / "README.md"] + PAGES
GENERATED_PAGES = {"rules.md", "divergences.md"}
JAX_PAGES = {"oracle.md", "fuzzing.md", "historic_bugs.md"}
MAX_NO_RUN = 2

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+)(?P<info>[^`\n]*)$")


def code_blocks(path: Path) -> list[tuple[str, str, int]]:
    """(info string, code, line number of the first code line) of every
    fenced block of a Markdown file."""
    lines = path.read_text().splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        body, j = [], i + 1
        while j < len(lines) and not re.match(rf"^[ \t]*{fence}\s*$", lines[j]):
            line = lines[j]
            body.append(line[len(indent):] if line.startswith(indent) else line.lstrip())
            j += 1
        out.append((info, "\n".join(body) + "\n", i + 2))
        i = j + 1
    return out


def python_blocks(path: Path):
    return [(info, code, line) for info, code, line in code_blocks(path)
            if info.split()[:1] == ["python"]]


def _runs(info: str) -> bool:
    return "no-run" not in info.split()[1:]


# --------------------------------------------------------------------------
# the rule tables, saved and restored around a page

def _registries():
    import importlib
    import spec
    from spec import arrays, core
    partial_eval = importlib.import_module("spec.partial_eval")   # spec.partial_eval is the function
    tables = [core.primitives, core.shape_rules, core.eval_rules, core.jvp_rules, core.transpose_rules,
              core.batch_rules, core.partial_eval_rules, core.dce_rules, core.param_specs,
              core.cost_rules, partial_eval.source_rules]
    return spec, tables, [arrays._Numeric, arrays._Symbolic]


@contextlib.contextmanager
def isolated_registry():
    """Whatever a page registers (primitives, rules, namespace operations)
    is removed when it is done."""
    _, tables, classes = _registries()
    saved = [dict(t) for t in tables]
    attrs = [set(vars(c)) for c in classes]
    try:
        yield
    finally:
        for t, s in zip(tables, saved):
            t.clear()
            t.update(s)
        for c, names in zip(classes, attrs):
            for name in set(vars(c)) - names:
                delattr(c, name)


def run_page(path: Path) -> int:
    """Run the page's python blocks in order in one namespace; returns how
    many ran. Fails with the file and line of the first failing block."""
    ns: dict = {"__name__": f"docs.{path.stem}"}
    ran = 0
    parser = doctest.DocTestParser()
    flags = doctest.NORMALIZE_WHITESPACE
    rel = path.relative_to(ROOT)
    with isolated_registry():
        for info, code, line in python_blocks(path):
            if not _runs(info):
                continue
            if ">>>" in code:
                test = parser.get_doctest(code, ns, f"{rel}:{line}", str(path), line - 1)
                test.globs = ns            # DocTest copies its globals: share the page's namespace
                report: list[str] = []
                runner = doctest.DocTestRunner(optionflags=flags)
                runner.run(test, out=report.append, clear_globs=False)
                if runner.failures:
                    pytest.fail(f"{rel}, block at line {line}:\n" + "".join(report), pytrace=False)
            else:
                # pad with newlines so tracebacks show the page's own line numbers
                exec(compile("\n" * (line - 1) + code, str(path), "exec"), ns)
            ran += 1
    return ran


# --------------------------------------------------------------------------
# 1. code blocks

RUN = [p for p in FILES if p.name not in GENERATED_PAGES]


@pytest.mark.parametrize("path", RUN, ids=[p.name for p in RUN])
def test_python_blocks_run(path):
    import spec
    before = dict(spec.primitives)
    blocks = python_blocks(path)
    ran = run_page(path)
    assert ran == sum(_runs(info) for info, _, _ in blocks)
    assert spec.primitives == before, "a page leaked primitives into the registry"


@pytest.mark.parametrize("name", sorted(GENERATED_PAGES))
def test_python_blocks_of_generated_pages_compile(name):
    path = DOCS / name
    for info, code, line in python_blocks(path):
        compile("\n" * (line - 1) + code, str(path), "exec")


def test_few_blocks_opt_out():
    opted = [f"{p.relative_to(ROOT)}:{line}" for p in FILES for info, _, line in python_blocks(p)
             if not _runs(info)]
    assert len(opted) <= MAX_NO_RUN, f"too many ```python no-run blocks: {opted}"


def test_only_the_jax_pages_need_jax():
    needs_jax = re.compile(r"^\s*(import|from)\s+(jax|jaxlib|oracle)\b", re.M)
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in FILES
                 if p.name not in JAX_PAGES | GENERATED_PAGES
                 for info, code, line in python_blocks(p) if _runs(info) and needs_jax.search(code)]
    assert not offenders, f"blocks that need JAX belong in {sorted(JAX_PAGES)}: {offenders}"


def test_every_page_has_code_that_runs():
    hand_written = [p for p in PAGES if p.name not in GENERATED_PAGES]
    assert {p.name for p in hand_written} >= {"index.md", "semantics.md", "policies.md", "oracle.md",
                                              "fuzzing.md"}
    for p in hand_written:
        assert any(_runs(info) for info, _, _ in python_blocks(p)), f"{p.name} has no python block that runs"


def test_code_block_parser(tmp_path):
    import textwrap
    text = textwrap.dedent("""\
        text
        ```python
        >>> 1 + 1
        2
        ```

        - item

          ```python no-run
          x = 1
          ```
        ```text
        out
        ```
        """)
    page = tmp_path / "page.md"
    page.write_text(text)
    assert code_blocks(page) == [("python", ">>> 1 + 1\n2\n", 3), ("python no-run", "x = 1\n", 10),
                                 ("text", "out\n", 13)]


# --------------------------------------------------------------------------
# 2. generated pages are fresh

def _gen_docs():
    """The generator's driver, tools/gen_docs/cli.py (its DOCS and ROOT are read when called)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return importlib.import_module("tools.gen_docs.cli")


def test_generated_docs_are_fresh():
    stale = _gen_docs().stale()
    assert not stale, ("generated docs are stale; run `python tools/gen_docs.py`:\n"
                       + "\n".join(diff[:3000] for _, diff in stale))


def test_gen_docs_check_exit_status(tmp_path, monkeypatch, capsys):
    gen = _gen_docs()
    assert gen.main(["--check"]) == 0
    # a stale page makes --check exit 1 (and a rewrite fixes it)
    pages = tmp_path / "docs"
    pages.mkdir()
    for p in PAGES:
        (pages / p.name).write_text(p.read_text())
    (pages / "rules.md").write_text("stale\n")
    monkeypatch.setattr(gen, "DOCS", pages)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    assert gen.main(["--check"]) == 1
    assert "stale: docs/rules.md" in capsys.readouterr().err
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0


# --------------------------------------------------------------------------
# 3. links

_LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|<a href=\"([^\"]+)\"")


def _links(path: Path) -> list[str]:
    text = path.read_text()
    # links inside code are not links
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [a or b for a, b in _LINK.findall(text)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    s = re.sub(r"<[^>]+>", "", heading).strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    out, seen = set(), {}
    for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    out |= set(re.findall(r"<a id=\"([^\"]+)\"", text))
    return out


def test_slug_matches_github():
    assert slug("`reduce_sum`") == "reduce_sum"
    assert slug("Nested checkpoints: the two rules") == "nested-checkpoints-the-two-rules"
    assert slug("What `dots_saveable` saves, and why") == "what-dots_saveable-saves-and-why"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_relative_links_resolve(path):
    bad = []
    for link in _links(path):
        if re.match(r"^[a-z]+:", link):          # http:, https:, mailto:
            continue
        target, _, anchor = link.partition("#")
        dest = (path.parent / target).resolve() if target else path
        if not dest.exists():
            bad.append(f"{link} (no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{link} (no heading #{anchor} in {dest.name})")
    assert not bad, f"{path.relative_to(ROOT)}: broken links: {bad}"


def test_every_page_is_reachable_from_the_readme():
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        p = todo.pop()
        if p in seen or not p.exists() or p.suffix != ".md":
            continue
        seen.add(p)
        for link in _links(p):
            target = link.partition("#")[0]
            if target and not re.match(r"^[a-z]+:", target):
                todo.append((p.parent / target).resolve())
    unreachable = [p.name for p in PAGES if p.resolve() not in seen]
    assert not unreachable, f"pages no link leads to from README.md: {unreachable}"
