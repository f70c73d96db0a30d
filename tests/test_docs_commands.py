"""Every command and Python snippet shown in README.md and docs/*.md (the tutorial, the
CLI reference, …) runs (CPU-sized), in order, one temporary directory per file.

Which fenced blocks are read
    * shell blocks: ```bash, ```sh, ```shell, ```console (there only the lines that
      start with ``$ ``), and plain ``` blocks whose first non-blank line starts with
      ``vortexsim``, ``python`` or ``pip`` (other plain blocks are output or listings);
    * Python blocks: ```python.
    A shell line is one command line: a trailing ``\\`` continues it, ``# ...`` is its
    comment, ``&&`` separates commands that run in turn, and ``<<'TAG'`` takes the lines
    up to ``TAG`` as the command's input (``python - <<'PY'``).

What runs (in the file's order, in its directory, so that later commands read the run
directories of earlier ones; the three files at once, each in a thread of its own; each
command must exit 0 within :data:`TIMEOUT`):
    * ``vortexsim ARGS`` as ``[sys.executable, "-m", "vortexsim", ARGS]`` (the console
      script may not be on the PATH) with this checkout first on ``PYTHONPATH``;
    * ``python ARGS`` (a heredoc as its input) and every ```python block
      (``python -c``: an exception is a non-zero exit).

What is not run, and what is checked instead
    * a block after the HTML comment ``<!-- not run: REASON -->`` (the line right before
      its fence), and a command line whose comment starts with ``# GPU`` or
      ``# not run``: its ``vortexsim`` commands must parse (the command's own parser),
      its Python must compile;
    * a command with ``--device gpu`` or ``--preset gpu`` (or Python with
      ``device="gpu"``) that is not marked so fails the test: GPU sizes never run here;
    * ``pip ...`` / ``python -m pip ...``: the test installs nothing; each must be
      ``pip install`` of ``.`` or ``.[EXTRAS]`` with extras that pyproject.toml defines;
    * ``python -m pytest ...``: the suite itself (CI runs the README's command through
      ``.ci/run``); the test files it names must exist;
    * ``paraview FILE``: not installed here; FILE must exist when its turn comes;
    * any other program (``mpiexec`` ...) fails the test: mark it, or teach this test.

Commands too slow for CI (the test's budget is about a minute on 2 cores): a documented
command listed in :data:`SHORTENED` runs with the arguments given there appended (a later
``--set`` wins): a shorter ``t_end`` or ``--steps N`` where no later command names the
run's snapshots, else a smaller size (``n_phi``, ``tracers_per_ring``) that keeps the
schedule and with it the snapshot names that later commands use.  A Python snippet's text
listed in :data:`PY_SHORTENED` is replaced before it runs.  Every entry must match a shown
command, so that a stale one fails.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: README.md and every page of docs/ with a shell or Python block
DOCS = tuple(p.relative_to(REPO).as_posix() for p in [REPO / "README.md",
                                                      *sorted((REPO / "docs").glob("*.md"))]
             if re.search(r"^```(bash|sh|shell|console|python)\s*$", p.read_text(encoding="utf-8"),
                          re.M))
#: seconds one shown command may take here (the shortened ones take a few)
TIMEOUT = 180

#: {doc: {command as shown (comment dropped, words joined by one space): appended args}}
SHORTENED = {
    "README.md": {
        "vortexsim run leapfrog": ["--steps", "2"],
        "vortexsim run collision --set n_phi=64 --set t_end=4 --out runs/c64":
            ["--set", "n_phi=8", "--set", "tracers_per_ring=16"],
    },
    "docs/tutorial.md": {
        "vortexsim run leapfrog --set n_phi=32 --set t_end=4 --out runs/lf32":
            ["--set", "t_end=0.2"],
        "vortexsim run leapfrog --set n_phi=48 --set t_end=4 --out runs/lf48":
            ["--set", "t_end=0.2"],
    },
}
#: {doc: {text of a Python snippet: what runs instead}}
PY_SHORTENED = {"README.md": {"sim.run(t_end=20.0)": "sim.run(t_end=0.2)"}}

_FENCE = re.compile(r"```\s*([\w+-]*)\s*")
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(.+?)\s*-->")
_COMMAND_START = re.compile(r"(\$ )?(vortexsim|python[\d.]*|pip\d*)(\s|$)")
_SHELL = {"bash", "sh", "shell", "console"}
_GPU_ARGS = {("--device", "gpu"), ("--preset", "gpu")}
_GPU_PYTHON = re.compile(r"""(device|preset)\s*=\s*["']gpu["']""")


@dataclasses.dataclass
class Step:
    """One shown command or Python snippet: ``kind`` "command" (``argv``, ``stdin``) or
    "python" (``code``); ``skip``: why it is not run (None: it runs)."""

    doc: str
    line: int
    kind: str
    text: str
    argv: list = dataclasses.field(default_factory=list)
    stdin: str | None = None
    skip: str | None = None

    def where(self):
        return f"{self.doc}:{self.line}: {self.text!r}"


def _blocks(text):
    """(line of the fence, language, [(line, text)], not-run reason) of each fenced block."""
    lines = text.splitlines()
    out, marker, i = [], None, 0
    while i < len(lines):
        s = lines[i].strip()
        fence = _FENCE.fullmatch(s)
        if fence:
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            body = [(k + 1, lines[k]) for k in range(i + 1, j)]
            out.append((i + 1, fence.group(1).lower(), body, marker))
            marker, i = None, j + 1
            continue
        not_run = _NOT_RUN.fullmatch(s)
        if not_run:
            marker = not_run.group(1)
        elif s:
            marker = None
        i += 1
    return out


def _split_comment(line):
    """(code, comment) of a shell line: the comment starts at an unquoted ``#`` that
    begins a word."""
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", lambda m: "x" * len(m.group()), line)
    m = re.search(r"(^|\s)#", unquoted)
    if not m:
        return line.rstrip(), ""
    return line[:m.start()].rstrip(), line[m.end():].strip()


def _shell_steps(doc, lang, body, marker):
    """The commands of a shell block, in order."""
    steps, k = [], 0
    while k < len(body):
        number, line = body[k]
        k += 1
        if lang == "console":
            if not line.startswith("$ "):
                continue                          # output shown after a command
            line = line[2:]
        while line.rstrip().endswith("\\") and k < len(body):
            line = line.rstrip()[:-1] + " " + body[k][1].strip()
            k += 1
        code, comment = _split_comment(line)
        if not code.strip():
            continue
        skip = marker
        if comment.startswith(("GPU", "not run")):
            skip = comment
        tokens = shlex.split(code)
        stdin = None
        if tokens and tokens[-1].startswith("<<"):          # a heredoc: its lines are input
            tag = tokens.pop()[2:]
            start = k
            while k < len(body) and body[k][1].strip() != tag:
                k += 1
            assert k < len(body), f"{doc}:{number}: heredoc {tag!r} not closed"
            stdin = "\n".join(text for _, text in body[start:k]) + "\n"
            k += 1
        bad = [t for t in tokens if t in ("|", "||", ";", "&", ">", ">>", "<")]
        assert not bad, f"{doc}:{number}: shell syntax {bad} that this test does not run"
        group = []
        for token in [*tokens, "&&"]:
            if token != "&&":
                group.append(token)
                continue
            assert group, f"{doc}:{number}: an empty command in {code!r}"
            steps.append(Step(doc, number, "command", " ".join(group), argv=group,
                              stdin=stdin, skip=skip))
            group = []
    return steps


def doc_steps(doc, text):
    """Every :class:`Step` of the markdown ``text`` of ``doc``, in order."""
    steps = []
    for line, lang, body, marker in _blocks(text):
        first = next((t.strip() for _, t in body if t.strip()), "")
        if lang == "python":
            code = "\n".join(t for _, t in body) + "\n"
            steps.append(Step(doc, line, "python", code, skip=marker))
        elif lang in _SHELL or (lang == "" and _COMMAND_START.match(first)):
            steps += _shell_steps(doc, lang, body, marker)
    return steps


def _is_gpu(step):
    if step.kind == "python":
        return bool(_GPU_PYTHON.search(step.text))
    a = step.argv
    pairs = set(zip(a, a[1:])) | {tuple(t.split("=", 1)) for t in a if "=" in t}
    return bool(pairs & _GPU_ARGS)


def _check_pip(step):
    a = step.argv
    args = a[3:] if a[0].startswith("python") else a[1:]
    assert args and args[0] == "install", f"{step.where()}: expected pip install"
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
                 ["optional-dependencies"])
    targets = [t for t in args[1:] if not t.startswith("-")]
    assert targets, f"{step.where()}: installs nothing"
    for target in targets:
        m = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", target)
        assert m, f"{step.where()}: expected . or .[extras], got {target!r}"
        unknown = set(filter(None, (m.group(1) or "").split(","))) - extras
        assert not unknown, f"{step.where()}: extras {unknown} not in pyproject.toml"


def _check_pytest(step):
    args, k = step.argv[3:], 0
    while k < len(args):
        if args[k] in ("-k", "-m", "-p"):
            k += 2
            continue
        if not args[k].startswith("-"):
            path = args[k].split("::")[0]
            assert (REPO / path).exists(), f"{step.where()}: no {path} in the repository"
        k += 1


def _is_pip(argv):
    return argv[0].startswith("pip") or argv[:3] == ["python", "-m", "pip"]


def _check(step, cwd, marked):
    """A step that is not run: a vortexsim command parses (its own parser), Python
    compiles, pip and pytest lines are well-formed; the files that ``paraview`` opens exist
    (not in a ``marked`` step, whose inputs were not made)."""
    from vortexsim.cli.command import build_parser
    a = step.argv
    if step.kind == "python" or a[:2] == ["python", "-"]:
        compile(step.text if step.kind == "python" else step.stdin, step.where(), "exec")
    elif a[0] == "vortexsim":
        error = io.StringIO()
        try:
            with contextlib.redirect_stderr(error):
                build_parser().parse_args(a[1:])
        except SystemExit as exc:
            pytest.fail(f"{step.where()}: does not parse (exit {exc.code}): "
                        f"{error.getvalue().strip()}")
    elif _is_pip(a):
        _check_pip(step)
    elif a[:3] == ["python", "-m", "pytest"]:
        _check_pytest(step)
    elif a[0] == "paraview" and not marked:
        for name in (t for t in a[1:] if not t.startswith("-")):
            assert (Path(cwd) / name).exists(), f"{step.where()}: no {name}"


def _argv(step, shortened, py_shortened, used):
    """What runs for ``step`` (None: checked only), with the appended arguments or the
    replaced text of :data:`SHORTENED`, :data:`PY_SHORTENED` (their keys added to
    ``used``)."""
    if step.kind == "python":
        code = step.text
        for old, new in py_shortened.items():
            if old in code:
                code = code.replace(old, new)
                used.add(old)
        return [sys.executable, "-c", code]
    a = step.argv
    if _is_pip(a) or a[:3] == ["python", "-m", "pytest"] or a[0] == "paraview":
        return None
    if a[0] == "vortexsim":
        if step.text in shortened:
            used.add(step.text)
        return [sys.executable, "-m", "vortexsim", *a[1:], *shortened.get(step.text, [])]
    if a[0] == "python":
        return [sys.executable, *a[1:]]
    pytest.fail(f"{step.where()}: {a[0]!r} is not a command this test runs; mark it "
                "'# not run: ...' or teach tests/test_docs_commands.py")


def _run(step, argv, cwd, env):
    """Run ``argv`` of ``step`` in ``cwd``; fails naming the shown command when it exits
    non-zero or times out."""
    try:
        result = subprocess.run(argv, cwd=cwd, env=env, input=step.stdin or "",
                                capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{step.where()}: still running after {TIMEOUT} s")
    tail = (result.stdout + result.stderr)[-3000:]
    assert result.returncode == 0, \
        f"{step.where()} (ran {argv[1:]}) exited {result.returncode}:\n{tail}"


def run_doc(doc, text, cwd, shortened=None, py_shortened=None):
    """Run (or check) every step of the markdown ``text`` of ``doc`` in ``cwd``, in order;
    returns (steps run, steps checked and not run)."""
    shortened, py_shortened = dict(shortened or {}), dict(py_shortened or {})
    used = set()
    env = {**os.environ, "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                       os.environ.get("PYTHONPATH")]))}
    ran, not_run = [], []
    for step in doc_steps(doc, text):
        if _is_gpu(step):
            assert step.skip, (f"{step.where()}: a GPU-size command that is not marked "
                               "'<!-- not run: ... -->' or '# GPU'")
        argv = None if step.skip else _argv(step, shortened, py_shortened, used)
        if argv is None:
            _check(step, cwd, marked=bool(step.skip))
            not_run.append(step)
            continue
        _run(step, argv, cwd, env)
        ran.append(step)
    stale = (set(shortened) | set(py_shortened)) - used
    assert not stale, f"{doc}: SHORTENED entries match no shown command: {sorted(stale)}"
    return ran, not_run


@pytest.fixture(scope="module")
def doc_runs(tmp_path_factory):
    """{doc: future of :func:`run_doc`}: the docs run at once, each in a thread and a
    directory of its own (their commands are independent), so that the test takes about
    the time of the longest one on a 2-core machine."""
    pool = ThreadPoolExecutor(len(DOCS))
    futures = {}
    for doc in DOCS:
        text = (REPO / doc).read_text(encoding="utf-8")
        cwd = tmp_path_factory.mktemp(Path(doc).stem)
        futures[doc] = pool.submit(run_doc, doc, text, cwd, SHORTENED.get(doc),
                                   PY_SHORTENED.get(doc))
    yield futures
    pool.shutdown(wait=True)


@pytest.mark.parametrize("doc", DOCS)
def test_every_shown_command_runs(doc, doc_runs):
    ran, not_run = doc_runs[doc].result()
    print(f"{doc}: {len(ran)} run, {len(not_run)} checked and not run: "
          + "; ".join(f"{s.line} {s.text[:40]!r}" for s in not_run))


def test_the_readme_quick_start_is_what_ci_runs():
    """The Quick start's first command installs and runs leapfrog (run here, pip left
    out); its second is ``.ci/run``'s command, verbatim, and is not run here."""
    steps = doc_steps("README.md", (REPO / "README.md").read_text(encoding="utf-8"))
    first = [s.text for s in steps[:4]]
    assert first == ["python -m pip install .", "vortexsim run leapfrog",
                     'python -m pip install -q -e .[test]', "python -m pytest -q"], first
    quick = (REPO / "README.md").read_text(encoding="utf-8").split("```bash\n", 1)[1]
    ci = [ln for ln in (REPO / ".ci" / "run").read_text().splitlines()
          if ln.strip() and not ln.startswith("#")]
    assert ci[-1] == quick.splitlines()[1], (ci[-1], quick.splitlines()[1])
    assert sum(s.kind == "command" and s.argv[0] == "vortexsim" for s in steps) >= 8
    assert sum(s.kind == "python" for s in steps) == 2


def test_a_failing_or_unmarked_command_fails_the_test(tmp_path):
    """The runner fails on a command that exits non-zero, a snippet that raises, an
    unmarked GPU command, an unknown program and a marked command that does not parse."""
    bad = {
        "```bash\nvortexsim cases no_such_case\n```\n": "exited 2",
        "```python\nraise RuntimeError('shown code fails')\n```\n": "shown code fails",
        "```bash\nvortexsim run leapfrog --preset gpu\n```\n": "not marked",
        "```bash\nmpiexec -n 2 vortexsim run leapfrog\n```\n": "not a command",
        "<!-- not run: needs a GPU -->\n```bash\nvortexsim run leapfrog --devise gpu\n```\n":
            "does not parse",
        "```bash\npython -m pip install \".[no_such_extra]\"\n```\n": "not in pyproject",
    }
    for text, message in bad.items():
        with pytest.raises((AssertionError, pytest.fail.Exception), match=message):
            run_doc("bad.md", text, tmp_path)
    ran, not_run = run_doc("good.md", "<!-- not run: needs a GPU -->\n```bash\n"
                           "vortexsim run leapfrog --preset gpu --device gpu\n```\n"
                           "```bash\nvortexsim run x.toml --device gpu  # GPU: a file\n```\n",
                           tmp_path)
    assert not ran and len(not_run) == 2
    with pytest.raises(AssertionError, match="match no shown command"):
        run_doc("stale.md", "text\n", tmp_path, {"vortexsim run gone": ["--steps", "1"]})
