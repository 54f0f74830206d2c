"""check-doc-commands' self-test: bad blocks must fail at their file:line,
good ones must pass."""

import os
import subprocess
import sys
import tempfile


SELF_TEST_BAD = """# bad

```sh
echo fine
```

```sh
echo one
false
echo never
```

```sh
no-such-command-of-pgfleet --flag
```

<!-- doc-test: skip: -->
```sh
echo skipped without a reason
```

<!-- doc-test: covered-by tests/no_such_test.cpp -->
```sh
echo covered by nothing
```

<!-- doc-test: sometimes -->
```sh
echo unknown annotation
```

```
echo a fence without a language
```

<!-- doc-test: skip: output is never run -->
```text
output
```

```sh
sleep 30
```
"""

SELF_TEST_GOOD = """# good

```sh
x=$(echo 41)
test "$((x + 1))" = 42
```

<!-- doc-test: skip: needs systemd -->
```sh
systemctl restart pgfleet-hostd
```

<!-- doc-test: covered-by tests/e2e/demo_test.cpp -->
```sh
false
```

```text
not run
```

```console
$ echo hi
hi
```
"""


def self_test():
    # the runner itself, scripts/check-doc-commands
    me = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "check-doc-commands")
    ok = True
    with tempfile.TemporaryDirectory(prefix="doc-commands-self-test.") as tmp:
        os.makedirs(os.path.join(tmp, "docs"))
        os.makedirs(os.path.join(tmp, "tests/e2e"))
        open(os.path.join(tmp, "tests/e2e/demo_test.cpp"), "w").close()
        with open(os.path.join(tmp, "docs/bad.md"), "w") as f:
            f.write(SELF_TEST_BAD)
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write(SELF_TEST_GOOD)
        cases = [
            (["README.md"], 0, ["2 ran, 1 skipped, 1 covered by tests; 0 failure(s)"]),
            (["docs/bad.md"], 1, [
                "docs/bad.md:7: sh block exited 1",
                "doc-test: docs/bad.md:9 exited 1",
                "docs/bad.md:13: sh block exited 127",
                "docs/bad.md:17: doc-test skip without a reason",
                "docs/bad.md:22: doc-test covered-by tests/no_such_test.cpp, which does not exist",
                "docs/bad.md:27: unknown doc-test annotation",
                "docs/bad.md:32: fenced block without a language",
                "docs/bad.md:36: doc-test annotation on a text block",
                "docs/bad.md:41: sh block timed out after 2 s",
            ]),
        ]
        for files, want_rc, wants in cases:
            r = subprocess.run([sys.executable, me, "--root", tmp, "--no-cluster", "--no-self-test",
                                "--timeout", "2"] + files,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            out = r.stdout.decode("utf-8", "replace")
            missing = [w for w in wants if w not in out]
            if "never" in out.splitlines():
                missing.append("(a line after a failing one ran)")
            if r.returncode != want_rc or missing:
                ok = False
                print(f"self-test: {' '.join(files)}: exit {r.returncode} (want {want_rc}); "
                      f"missing from the output: {missing}\n{out}")
    print("self-test: " + ("the checker fails bad blocks at their file:line and passes good ones"
                           if ok else "FAILED"), flush=True)
    return ok
