#!/usr/bin/env python3
# hollow.py: finds test checks that cannot fail, in the shell and Python
# test scripts under the directories given.
#
#   hollow.py [--allow FILE] PATH...
#
# Shell (*.sh, *.test and scripts with a shell #!), the scripts given to
# sh -c, bash -c and eval included:
#   and-outside  a check helper (that, has, run, ...) followed by `&&`: the
#                helper records its own condition only, and what follows
#                `&&` is a second condition that nobody records
#                (`that NAME [ a ] && [ b ]` passes whenever a holds);
#   or-outside   a check helper followed by `|| [ ... ]`, the same with an
#                alternative;
#   after-bad    `bad ... || ok ...`: bad returns 1, so a pass is counted
#                beside the failure (`A && bad X || ok Y`);
#   swallowed    `|| true`, `|| :`, `; true` or `; :` right after a status
#                test ([, [[, test) or a check helper: the status is
#                thrown away (`[ $? = 125 ] || true`).
# Python (*.py):
#   constant     check(...) (a function named check or expect) whose
#                condition is a constant, or an `or` with a true constant.
#
# Prints PATH:LINE: RULE: TEXT for each finding and exits 1 when there is
# one that the allow list does not excuse. The allow list has one entry a
# line, `PATH:RULE:TEXT<TAB>reason`, PATH relative to the directory given,
# TEXT a substring of the line; an entry that excuses nothing is an error
# too, so the list cannot rot.
import ast
import os
import re
import sys

# Shell functions of the test scripts that record a pass or a failure.
CHECKS = {"that", "that_p", "has", "hasnt", "has_p", "jhas", "same", "check", "expect",
          "verdict", "teardown", "timings_ordered", "refused", "run"}
# Those that record a failure (and return 1).
FAILS = {"bad", "fail_", "pend"}
TESTS = {"[", "[[", "test"}
TRUE = {"true", ":"}
# Reserved words that may come before a command's name.
KEYWORDS = {"if", "then", "else", "elif", "while", "until", "do", "!", "{", "time"}
SEPARATORS = ("&&", "||", ";;", ";", "|", "&", "\n", "(", ")")
PY_CHECKS = {"check", "expect"}


class Cmd:
    """One simple command: its words, its first line, the operator after it."""

    def __init__(self, line):
        self.words, self.line, self.after = [], line, "\n"
        self.after_line = line		# where the operator after it is


class Scanner:
    """A shell tokenizer just good enough for the test scripts: quotes,
    escapes, $(...), ${...}, comments and here-documents."""

    def __init__(self, text, line=1):
        self.s, self.i, self.line = text, 0, line
        self.heredocs = []

    def peek(self, k=0):
        """The character k ahead, or NUL past the end (never "in" a set)."""
        j = self.i + k
        return self.s[j] if j < len(self.s) else "\0"

    def skip_balanced(self, open_, close):
        """From just after open_, past its matching close (quotes honoured)."""
        depth = 1
        while self.i < len(self.s) and depth:
            c = self.peek()
            if c == "\\":
                self.line += self.peek(1) == "\n"
                self.i += 2
                continue
            if c == "'":
                self.single()
                continue
            if c == '"':
                self.double()
                continue
            if c == "\n":
                self.line += 1
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
            self.i += 1

    def single(self):
        end = self.s.find("'", self.i + 1)
        end = len(self.s) if end < 0 else end
        body = self.s[self.i + 1:end]
        self.line += body.count("\n")
        self.i = end + 1
        return body

    def double(self):
        out = []
        self.i += 1
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) in '"\\$`\n':
                if self.peek(1) == "\n":
                    self.line += 1
                else:
                    out.append(self.peek(1))
                self.i += 2
                continue
            if c == '"':
                self.i += 1
                break
            if c == "$" and self.peek(1) in "({":
                start = self.i
                self.i += 2
                self.skip_balanced(*("()" if self.s[start + 1] == "(" else "{}"))
                out.append(self.s[start:self.i])
                continue
            if c == "\n":
                self.line += 1
            out.append(c)
            self.i += 1
        return "".join(out)

    def heredoc_bodies(self):
        """At the start of a line: skip the bodies of pending here-documents."""
        for delim, strip in self.heredocs:
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                l = self.s[self.i:end]
                self.i, self.line = end + 1, self.line + 1
                if (l.lstrip("\t") if strip else l) == delim:
                    break
        self.heredocs = []

    def word(self):
        """One word: (raw text, text with quotes removed)."""
        start, plain = self.i, []
        while self.i < len(self.s):
            c = self.peek()
            if c in " \t\n;&|()<>":
                break
            if c == "\\":
                if self.peek(1) == "\n":
                    self.line += 1
                else:
                    plain.append(self.peek(1))
                self.i += 2
            elif c == "'":
                plain.append(self.single())
            elif c == '"':
                plain.append(self.double())
            elif c == "$" and self.peek(1) in "({":
                s0 = self.i
                self.i += 2
                self.skip_balanced(*("()" if self.s[s0 + 1] == "(" else "{}"))
                plain.append(self.s[s0:self.i])
            else:
                plain.append(c)
                self.i += 1
        return self.s[start:self.i], "".join(plain)

    def commands(self):
        cmds, cur = [], None
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":
                self.i += 2
                self.line += 1
                continue
            if c in " \t":
                self.i += 1
                continue
            if c == "#":		# at a word's start: a comment
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
                continue
            op = next((o for o in SEPARATORS if self.s.startswith(o, self.i)), None)
            if op:
                if cur and cur.words:
                    cur.after, cur.after_line = op, self.line
                    cmds.append(cur)
                cur = None
                self.i += len(op)
                if op == "\n":
                    self.line += 1
                    if self.heredocs:
                        self.heredoc_bodies()
                continue
            if c in "<>":
                # A redirection: the operator, then its target word.
                m = re.match(r"\d*(<<-?|<<<|>>|<&|>&|<>|>\||<|>)", self.s[self.i:])
                self.i += len(m.group(0)) if m else 1
                while self.peek() in " \t":
                    self.i += 1
                _, target = self.word()
                if m and m.group(1) in ("<<", "<<-"):
                    self.heredocs.append((target, m.group(1) == "<<-"))
                continue
            if cur is None:
                cur = Cmd(self.line)
            raw, plain = self.word()
            cur.words.append((raw, plain))
        if cur and cur.words:
            cur.after = "EOF"
            cmds.append(cur)
        return cmds


def name_of(cmd):
    """The command's name past reserved words and assignments, and its index."""
    for k, (raw, plain) in enumerate(cmd.words):
        if plain in KEYWORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", raw):
            continue
        return plain, k
    return "", len(cmd.words)


def scripts_in(cmd):
    """Shell text this command runs: sh -c S, bash -c S, busybox sh -c S, eval S."""
    plains = [p for _, p in cmd.words]
    name, k = name_of(cmd)
    out = []
    for j in range(k, len(plains) - 1):
        if plains[j] in ("sh", "bash", "ash", "dash") and plains[j + 1] == "-c" and j + 2 < len(plains):
            out.append(plains[j + 2])
        if plains[j] == "eval":
            out.append(" ".join(plains[j + 1:]))
            break
    return out


def text_of(cmd):
    return " ".join(raw for raw, _ in cmd.words)


def shell_findings(text, line=1):
    cmds = Scanner(text, line).commands()
    found = []
    for n, cmd in enumerate(cmds):
        name, _ = name_of(cmd)
        nxt = cmds[n + 1] if n + 1 < len(cmds) else None
        nxt_name = name_of(nxt)[0] if nxt else ""
        if name in CHECKS and cmd.after == "&&":
            found.append((cmd.after_line, "and-outside", text_of(cmd) + " && " + (text_of(nxt) if nxt else "")))
        if name in CHECKS and cmd.after == "||" and nxt_name in TESTS:
            found.append((cmd.after_line, "or-outside", text_of(cmd) + " || " + text_of(nxt)))
        if name in FAILS and cmd.after == "||" and (nxt_name == "ok" or nxt_name in CHECKS):
            found.append((cmd.after_line, "after-bad", text_of(cmd) + " || " + (text_of(nxt) if nxt else "")))
        if (name in TESTS or name in CHECKS) and cmd.after in ("||", ";", "\n") and nxt \
                and nxt_name in TRUE and len(nxt.words) == 1:
            found.append((nxt.line, "swallowed", text_of(cmd) + " " + cmd.after.strip() + " " + nxt_name))
        for script in scripts_in(cmd):
            found += [(cmd.after_line if cmd.after != "EOF" else cmd.line, rule, t)
                      for _, rule, t in shell_findings(script)]
    return found


def const_true(node):
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return any(isinstance(v, ast.Constant) and v.value for v in node.values)
    return False


def python_findings(text):
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return [(e.lineno or 1, "syntax", str(e))]
    # Where each check function takes its condition (a parameter named cond).
    pos = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in PY_CHECKS:
            names = [a.arg for a in node.args.args]
            pos[node.name] = names.index("cond") if "cond" in names else 0
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in PY_CHECKS):
            continue
        k = pos.get(node.func.id, 0)
        cond = node.args[k] if k < len(node.args) else None
        for kw in node.keywords:
            if kw.arg == "cond":
                cond = kw.value
        if cond is not None and const_true(cond):
            found.append((node.lineno, "constant", ast.unparse(node)[:160]))
    return found


def kind(path):
    if path.endswith(".py"):
        return "python"
    if path.endswith((".sh", ".test")):
        return "shell"
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return None
    if re.match(rb"#!\s*\S*/(env\s+)?(ba|da|a)?sh\b", first):
        return "shell"
    if re.match(rb"#!\s*\S*/(env\s+)?python", first):
        return "python"
    return None


def files_under(root):
    if os.path.isfile(root):
        yield root
        return
    for d, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("corpus", "__pycache__", "fixtures"))
        for n in sorted(names):
            yield os.path.join(d, n)


def load_allow(path):
    allow = []
    if not path:
        return allow
    with open(path) as f:
        for n, l in enumerate(f, 1):
            l = l.rstrip("\n")
            if not l or l.startswith("#"):
                continue
            key, _, reason = l.partition("\t")
            p, _, rest = key.partition(":")
            rule, _, text = rest.partition(":")
            if not (p and rule and text and reason.strip()):
                raise SystemExit("%s:%d: not PATH:RULE:TEXT<TAB>reason" % (path, n))
            allow.append({"path": p, "rule": rule, "text": text, "used": 0, "line": n})
    return allow


def main(argv):
    allow_file = None
    if len(argv) > 2 and argv[1] == "--allow":
        allow_file, argv = argv[2], argv[2:]
    if len(argv) < 2:
        print("usage: hollow.py [--allow FILE] PATH...", file=sys.stderr)
        return 2
    allow = load_allow(allow_file)
    bad = 0
    for root in argv[1:]:
        base = root if os.path.isdir(root) else os.path.dirname(root)
        for path in files_under(root):
            k = kind(path)
            if not k:
                continue
            with open(path, errors="replace") as f:
                text = f.read()
            found = python_findings(text) if k == "python" else shell_findings(text)
            rel = os.path.relpath(path, base)
            for line, rule, t in sorted(set(found)):
                t = " ".join(t.split())
                excuse = next((a for a in allow if a["path"] == rel and a["rule"] == rule
                               and a["text"] in t), None)
                if excuse:
                    excuse["used"] += 1
                    continue
                print("%s:%d: %s: %s" % (path, line, rule, t[:200]))
                bad += 1
    for a in allow:
        if not a["used"]:
            print("%s:%d: the allow list excuses nothing: %s:%s:%s"
                  % (allow_file, a["line"], a["path"], a["rule"], a["text"]))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
