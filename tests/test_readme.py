"""The README's example runs and prints what the README shows."""
import contextlib
import io
import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_readme_starts_with_the_two_setup_commands():
    text = README.read_text()
    first_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    assert first_block.splitlines()[0].startswith("make fuzz")
    assert first_block.splitlines()[1].startswith("make test")


def test_readme_example_prints_what_it_shows():
    text = README.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"```text\n(.*?)```", text, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {})
    assert shown.strip() in out.getvalue()
