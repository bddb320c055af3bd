# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Source code and developer output: Python, JavaScript, Go, minified bundles, HTML,
stack traces and diffs. Indentation and boilerplate make these compress well, legitimately.
"""

from __future__ import annotations

import random

from tests.corpora.text import english_sentence, words


def _ident(rng: random.Random, parts: int = 2) -> str:
    return "_".join(words(rng, "en", parts)).replace("'", "")


def _camel(rng: random.Random, parts: int = 2) -> str:
    first, *rest = words(rng, "en", parts)
    return first + "".join(w.capitalize() for w in rest)


def python_function(rng: random.Random) -> str:
    name, args = _ident(rng), [_ident(rng, 1) for _ in range(rng.randint(1, 4))]
    body = [f'    """{english_sentence(rng, low=4, high=14)}"""']
    for _ in range(rng.randint(2, 9)):
        var = _ident(rng, 1)
        choice = rng.random()
        if choice < 0.3:
            body.append(f"    {var} = {rng.choice(args)}.get({_ident(rng, 1)!r}, {rng.randint(0, 100)})")
        elif choice < 0.55:
            body += [
                f"    if {rng.choice(args)} is None:",
                f'        raise ValueError(f"{english_sentence(rng, low=3, high=7)}: '
                f'{{{rng.choice(args)}!r}}")',
            ]
        elif choice < 0.8:
            body += [
                f"    for {var} in {rng.choice(args)}:",
                f"        {_ident(rng, 1)}.append({var} * {rng.randint(2, 9)})",
            ]
        else:
            body.append(f"    # {english_sentence(rng, low=4, high=12)}")
    body.append(f"    return {rng.choice(args)}")
    return f"def {name}({', '.join(args)}):\n" + "\n".join(body)


def python_module(rng: random.Random, chars: int) -> str:
    parts = [
        '"""' + english_sentence(rng) + '"""',
        "from __future__ import annotations\n\nimport json\nimport os\nfrom pathlib import Path",
    ]
    total = 0
    while total < chars:
        if rng.random() < 0.2:
            cls = _camel(rng).capitalize()
            methods = "\n\n".join(
                "    " + python_function(rng).replace("\n", "\n    ") for _ in range(rng.randint(1, 4))
            )
            part = f"class {cls}:\n    {_ident(rng, 1)}: int = {rng.randint(0, 9)}\n\n{methods}"
        else:
            part = python_function(rng)
        parts.append(part)
        total += len(part)
    return "\n\n\n".join(parts) + "\n"


def js_function(rng: random.Random) -> str:
    name, args = _camel(rng), [_camel(rng, 1) for _ in range(rng.randint(1, 3))]
    lines = [f"export async function {name}({', '.join(args)}) {{"]
    for _ in range(rng.randint(2, 8)):
        var = _camel(rng, 2)
        choice = rng.random()
        if choice < 0.35:
            lines.append(
                f"  const {var} = await fetch(`/api/${{{args[0]}}}/{_camel(rng, 1)}`).then((r) => r.json());"
            )
        elif choice < 0.6:
            lines += [
                f"  if (!{rng.choice(args)}) {{",
                f"    throw new Error('{english_sentence(rng, low=3, high=8)}');",
                "  }",
            ]
        elif choice < 0.85:
            lines.append(
                f"  const {var} = {rng.choice(args)}.filter((x) => x.{_camel(rng, 1)} > "
                f"{rng.randint(0, 50)}).map((x) => x.id);"
            )
        else:
            lines.append(f"  // {english_sentence(rng, low=4, high=10)}")
    lines += [f"  return {rng.choice(args)};", "}"]
    return "\n".join(lines)


def javascript_module(rng: random.Random, chars: int) -> str:
    parts = ["'use strict';", "import { readFile } from 'node:fs/promises';"]
    total = 0
    while total < chars:
        part = js_function(rng)
        parts.append(part)
        total += len(part)
    return "\n\n".join(parts) + "\n"


def go_source(rng: random.Random, chars: int) -> str:
    parts = ["package service", 'import (\n\t"context"\n\t"errors"\n\t"fmt"\n)']
    total = 0
    while total < chars:
        name, typ = _camel(rng).capitalize(), _camel(rng).capitalize()
        fields = "\n".join(
            f"\t{_camel(rng, 1).capitalize()} {rng.choice(('string', 'int64', 'bool', '[]byte'))} "
            f'`json:"{_ident(rng, 1)}"`'
            for _ in range(rng.randint(2, 6))
        )
        comment, message = english_sentence(rng, low=4, high=10), english_sentence(rng, low=2, high=5).lower()
        part = (
            f"// {typ} {comment}\ntype {typ} struct {{\n{fields}\n}}\n\n"
            f"func (s *Server) {name}(ctx context.Context, req *{typ}) (*{typ}, error) {{\n"
            f'\tif req == nil {{\n\t\treturn nil, errors.New("{message}")'
            "\n\t}\n\tres, err := s.store.Get(ctx, req.ID)\n\tif err != nil {\n"
            f'\t\treturn nil, fmt.Errorf("{name.lower()}: %w", err)\n\t}}\n\treturn res, nil\n}}'
        )
        parts.append(part)
        total += len(part)
    return "\n\n".join(parts) + "\n"


def minified_js(rng: random.Random, chars: int) -> str:
    """A production bundle: one enormous line, short names, no spaces. Not padding."""
    pieces: list[str] = ['!function(e,t){"use strict";var n={};']
    total = 0
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    while total < chars:
        a, b, c = rng.choice(letters), rng.choice(letters), rng.choice(letters)
        key = _camel(rng)
        piece = rng.choice(
            (
                f"n.{key}=function({a},{b}){{return {a}&&{a}.{_camel(rng, 1)}?"
                f"{a}.{_camel(rng, 1)}({b}):{rng.randint(0, 999)}}};",
                f'var {a}{b}={rng.randint(0, 99999)},{c}=e.{key}||"{_ident(rng)}";',
                f"function {a}{c}({b}){{for(var {a}=0;{a}<{b}.length;{a}++)"
                f'if({b}[{a}]==="{key}")return {a};return-1}}',
                f"t.{key}=[{','.join(str(rng.randint(0, 4096)) for _ in range(rng.randint(2, 12)))}];",
                f'n.{key}="{english_sentence(rng, low=3, high=9)}";',
            )
        )
        pieces.append(piece)
        total += len(piece)
    pieces.append("}(window,document);")
    return "".join(pieces)


_HTML_HEAD = (
    '<!DOCTYPE html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">\n  <title>{title}</title>\n'
    '</head>\n<body>\n  <nav class="navbar navbar-expand-lg">'
)
_HTML_CARD = (
    '    <div class="card mb-3"><div class="card-body">\n      <h5 class="card-title">{title}</h5>\n'
    '      <p class="card-text">{text}</p>\n    </div></div>'
)


def _html_table(rng: random.Random) -> str:
    rows = "\n".join(
        f"        <tr><td>{rng.randint(1, 999)}</td><td>{' '.join(words(rng, 'en', 2))}</td>"
        f"<td>{rng.uniform(0, 99):.1f}%</td></tr>"
        for _ in range(rng.randint(2, 8))
    )
    return f'    <table class="table table-striped">\n      <tbody>\n{rows}\n      </tbody>\n    </table>'


def html_page(rng: random.Random, chars: int) -> str:
    parts = [_HTML_HEAD.format(title=" ".join(words(rng, "en", 4)).title())]
    parts += [f'    <a class="nav-link" href="/{w}">{w.title()}</a>' for w in words(rng, "en", 6)]
    parts.append('  </nav>\n  <main class="container">')
    total = 0
    while total < chars:
        if rng.random() < 0.7:
            title = " ".join(words(rng, "en", 3)).title()
            part = _HTML_CARD.format(title=title, text=f"{english_sentence(rng)} {english_sentence(rng)}")
        else:
            part = _html_table(rng)
        parts.append(part)
        total += len(part)
    parts.append("  </main>\n</body>\n</html>")
    return "\n".join(parts)


_JAVA_FRAMES = (
    "org.apache.catalina.core.ApplicationFilterChain.internalDoFilter(ApplicationFilterChain.java:{n})",
    "org.apache.catalina.core.ApplicationFilterChain.doFilter(ApplicationFilterChain.java:{n})",
    "org.springframework.web.filter.OncePerRequestFilter.doFilter(OncePerRequestFilter.java:{n})",
    "org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:{n})",
    "org.springframework.security.web.FilterChainProxy$VirtualFilterChain.doFilter(FilterChainProxy.java:{n})",
    "java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:{n})",
)


def _java_trace(rng: random.Random) -> str:
    frames = "\n".join(
        f"\tat {rng.choice(_JAVA_FRAMES).format(n=rng.randint(40, 900))}" for _ in range(rng.randint(20, 80))
    )
    handler = f"com.example.{_camel(rng)}.handle(Handler.java:{rng.randint(10, 300)})"
    return (
        f"java.lang.IllegalStateException: {english_sentence(rng, low=3, high=9)}\n\tat {handler}\n{frames}"
    )


def _python_trace(rng: random.Random) -> str:
    frames = "\n".join(
        f'  File "/srv/app/{_ident(rng, 1)}/{_ident(rng, 1)}.py", line {rng.randint(1, 800)}, '
        f"in {_ident(rng)}\n"
        f"    {_ident(rng, 1)} = {_ident(rng)}({_ident(rng, 1)})"
        for _ in range(rng.randint(3, 15))
    )
    return f"Traceback (most recent call last):\n{frames}\nKeyError: '{_ident(rng, 1)}'"


def stack_traces(rng: random.Random, count: int) -> str:
    """Java traces with deep, repetitive framework frames, and Python tracebacks."""
    return "\n\n".join(_java_trace(rng) if rng.random() < 0.5 else _python_trace(rng) for _ in range(count))


def unified_diff(rng: random.Random, hunks: int) -> str:
    out = ["diff --git a/src/app.py b/src/app.py", "--- a/src/app.py", "+++ b/src/app.py"]
    line = 1
    for _ in range(hunks):
        line += rng.randint(5, 80)
        out.append(f"@@ -{line},7 +{line},8 @@ def {_ident(rng)}():")
        for _ in range(rng.randint(4, 10)):
            out.append(
                rng.choice(" +-")
                + "    "
                + rng.choice(
                    (
                        f"{_ident(rng, 1)} = {_ident(rng)}()",
                        f"# {english_sentence(rng, low=3, high=8)}",
                        f"return {_ident(rng, 1)}",
                    )
                )
            )
    return "\n".join(out)
