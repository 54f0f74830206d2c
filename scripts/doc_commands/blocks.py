"""The fenced blocks of a Markdown file, their doc-test annotations, and
running one (scripts/check-doc-commands)."""

import os
import re
import signal
import subprocess
import time


SHELL_LANGS = {"sh", "bash", "shell", "console"}
SQL_LANGS = {"sql"}
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)")
ANNOTATION = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, path, line, lang, body, annotation, annotation_line):
        self.path = path              # relative to the root
        self.line = line              # of the opening fence, 1-based
        self.lang = lang
        self.body = body              # the lines, without the fence's indent
        self.annotation = annotation  # the text after "doc-test:", or None
        self.annotation_line = annotation_line

    @property
    def where(self):
        return f"{self.path}:{self.line}"

    @property
    def runnable(self):
        return self.lang in SHELL_LANGS or self.lang in SQL_LANGS


def parse(root, rel):
    """The fenced blocks of one Markdown file, and the errors of its fences."""
    blocks, errors = [], []
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i
        body = []
        i += 1
        closed = False
        while i < len(lines):
            cm = re.match(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$", lines[i])
            if cm:
                closed = True
                break
            text = lines[i]
            body.append(text[indent:] if text[:indent].strip() == "" else text.lstrip())
            i += 1
        i += 1
        prev = lines[start - 1] if start > 0 else ""
        am = ANNOTATION.match(prev)
        b = Block(rel, start + 1, lang, body, am.group(1) if am else None, start if am else None)
        if not closed:
            errors.append(f"{b.where}: fence never closed")
        blocks.append(b)
    return blocks, errors


def markdown_files(root):
    files = ["README.md"] if os.path.exists(os.path.join(root, "README.md")) else []
    docs = os.path.join(root, "docs")
    found = []
    for d, _, names in os.walk(docs):
        for n in names:
            if n.endswith(".md"):
                found.append(os.path.relpath(os.path.join(d, n), root))
    return files + sorted(found)


def classify(root, b):
    """('run' | 'skip' | 'covered' | 'ignore', error or None)."""
    if b.lang == "":
        return "ignore", (f"{b.where}: fenced block without a language "
                          "(name it: sh or sql run, text for output)")
    if b.annotation is None:
        return ("run" if b.runnable else "ignore"), None
    if not b.runnable:
        return "ignore", (f"{b.path}:{b.annotation_line}: doc-test annotation on a {b.lang} "
                          "block, which never runs")
    a = b.annotation
    m = re.match(r"^skip\s*:\s*(.*)$", a)
    if m:
        if not m.group(1).strip():
            return "skip", f"{b.path}:{b.annotation_line}: doc-test skip without a reason"
        return "skip", None
    m = re.match(r"^covered-by\s+(\S+)", a)
    if m:
        target = m.group(1).rstrip(":,;")
        if not os.path.exists(os.path.join(root, target)):
            return "covered", (f"{b.path}:{b.annotation_line}: doc-test covered-by {target}, "
                               "which does not exist")
        return "covered", None
    return "ignore", (f"{b.path}:{b.annotation_line}: unknown doc-test annotation \"{a}\" "
                      "(skip: REASON or covered-by PATH)")


def console_commands(body):
    """A console block's commands: its `$ ` lines and their continuations."""
    out, cont = [], False
    for line in body:
        if line.startswith("$ "):
            out.append(line[2:])
            cont = line.rstrip().endswith("\\")
        elif cont:
            out.append(line)
            cont = line.rstrip().endswith("\\")
    return out


def run_block(root, b, env_file, timeout, work):
    """Runs one block; returns (ok, message)."""
    script = os.path.join(work, "block")
    header = []
    if env_file:
        header.append(f'source "{env_file}"')
    header.append(f'cd "{root}"')
    if b.lang in SQL_LANGS:
        sql = os.path.join(work, "block.sql")
        with open(sql, "w") as f:
            f.write("\n".join(b.body) + "\n")
        header.append(f'exec psql -X -q -v ON_ERROR_STOP=1 -f "{sql}"')
        body = []
    else:
        body = console_commands(b.body) if b.lang == "console" else b.body
        # Which line failed, as the file's line number: body line k is the
        # script's line len(header) + k and the file's line b.line + k.
        n = len(header) + 1
        header.append(f"trap 'echo \"doc-test: {b.path}:$(( {b.line} + LINENO - {n} ))"
                      " exited $?\" >&2' ERR")
    with open(script, "w") as f:
        f.write("\n".join(header + body) + "\n")
    t0 = time.monotonic()
    p = subprocess.Popen(["bash", "-e", script], cwd=root, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    if True:  # whatever the block left behind in its session goes too
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if timed_out:
        out, _ = p.communicate()
    text = out.decode("utf-8", "replace")
    lines = text.splitlines()
    if len(lines) > 40:
        text = "\n".join([f"... ({len(lines) - 40} lines of output left out)"] + lines[-40:]) + "\n"
    if b.lang in SQL_LANGS:  # psql:/tmp/.../block.sql:3: ERROR -> README.md:49: ERROR
        text = re.sub(r"psql:[^:\s]*block\.sql:(\d+):",
                      lambda m: f"{b.path}:{b.line + int(m.group(1))}:", text)
    secs = time.monotonic() - t0
    if timed_out:
        return False, f"timed out after {timeout:g} s\n{text}"
    if p.returncode != 0:
        return False, f"exited {p.returncode} after {secs:.1f} s\n{text}"
    return True, f"{secs:.1f} s"


def top_level(root):
    return {n for n in os.listdir(root)}


def remove_new_files(root, before):
    removed = []
    for n in sorted(top_level(root) - before):
        p = os.path.join(root, n)
        if os.path.isfile(p) or os.path.islink(p):
            os.unlink(p)
            removed.append(n)
    return removed
