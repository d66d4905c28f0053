"""Build the documentation site from the notebooks' saved outputs: `python docs/build.py [OUT]` (`make docs`, OUT = _docs).

No notebook is executed. Each notebook in `nbs/` is copied to a staging folder and prepared the way nbdev prepares
it for Quarto: hidden cells and `#|` directives dropped, a reference entry (signature with its parameter comments,
docstring, source link) after every exported function and class, plotly figures redrawn from their saved data with a
local plotly.js, the replay widget replaced by a link to its standalone export, links to other notebooks resolved.
Sphinx with MyST-NB (`docs/conf.py`) then renders the staging folder into OUT, with its own copy of MathJax for the
math (from the django-static-mathjax package): no page loads anything from the network."""
import ast, configparser, json, re, shutil, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT/'docs'
NBS = ROOT/'nbs'
# the sidebar, in the recipe's order: a section takes the top-level notebooks whose name starts with its prefix, or a folder
SECTIONS = [('Foundations', '0'), ('Stage 1: agentic SFT', '1'), ('Stage 2: agentic RL with IGPO', '2'),
            ('Analysis', '3'), ('Integration', '4'), ('Explanations', 'explanations/'), ('Tutorials', 'tutorials/')]
FIRST = {'tutorials/': ['recipe', 'experiment']}  # within a folder, these first (then the rest by name)
REPLAY_PAGE = 'replay.html'  # the standalone replay export, beside the pages

def settings():
    "settings.ini's [DEFAULT] section: the site takes its title, description and repository from it"
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(ROOT/'settings.ini')
    return dict(cp['DEFAULT'])

def pages():
    "[(section title or None for the home page, [notebook paths relative to nbs/ without .ipynb])] in sidebar order"
    found = sorted(p.relative_to(NBS).with_suffix('').as_posix() for p in NBS.rglob('*.ipynb')
                   if not any(part.startswith(('.', '_')) for part in p.relative_to(NBS).parts) and 'out' not in p.relative_to(NBS).parts[:-1])
    out, left = [(None, ['index'])], [n for n in found if n != 'index']
    for title, prefix in SECTIONS:
        if prefix.endswith('/'): mine = [n for n in left if n.startswith(prefix)]
        else: mine = [n for n in left if '/' not in n and n.startswith(prefix)]
        first = [prefix + s for s in FIRST.get(prefix, []) if prefix + s in mine]
        mine = first + [n for n in mine if n not in first]
        if mine: out.append((title, mine))
        left = [n for n in left if n not in mine]
    if left: raise SystemExit(f'docs/build.py: no sidebar section for {left}: add one to SECTIONS')
    return out

# --- cells ------------------------------------------------------------------------------------------------------

DIRECTIVE = re.compile(r'^\s*#\s*\|\s*([\w-]+):?\s*(.*)$')

def directives(src):
    "{name: value} of a code cell's leading `#|` lines (nbdev and Quarto both write them there)"
    out = {}
    for line in src.splitlines():
        m = DIRECTIVE.match(line)
        if m: out[m.group(1)] = m.group(2).strip()
        elif line.strip(): break
    return out

def strip_directives(src):
    return '\n'.join(l for l in src.splitlines() if not DIRECTIVE.match(l)).strip('\n')

def _header(lines, node):
    "The def/class line(s) of `node` as written (parameter comments kept), without the trailing colon"
    first, body = node.lineno - 1, node.body[0]
    if body.lineno - 1 == first:  # one line: `def f(x): return x`
        return lines[first][:body.col_offset].rstrip().rstrip(':').rstrip()
    text = '\n'.join(lines[first:body.lineno - 1]).rstrip()
    return text[:-1].rstrip() if text.endswith(':') else text

def _class_sig(lines, node):
    "A class's header, then its `__init__` header, or else its annotated fields (a dataclass), as written"
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == '__init__'), None)
    if init: rest = [_header(lines, init)]
    else: rest = ['\n'.join(lines[n.lineno - 1:n.end_lineno]) for n in node.body if isinstance(n, ast.AnnAssign)]
    return '\n'.join([_header(lines, node) + (':' if rest else '')] + rest)

def _patched(node):
    "The class name of a fastcore `@patch` function (`def f(self:Cls)`), else None"
    if not any((isinstance(d, ast.Name) and d.id == 'patch') or (isinstance(d, ast.Call) and getattr(d.func, 'id', '') == 'patch')
               for d in node.decorator_list): return None
    a = node.args.args[0].annotation if node.args.args else None
    return a.id if isinstance(a, ast.Name) else (ast.unparse(a) if a is not None else None)

def reference(src, module, cfg):
    "Markdown reference entries for the public functions and classes an exported cell defines (nbdev's show_doc, statically)"
    try: tree = ast.parse(src)
    except SyntaxError: return []
    lines, out = src.splitlines(), []
    lib = ROOT/cfg['lib_path']/f'{module}.py'
    lib_lines = lib.read_text().splitlines() if module and lib.exists() else []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): continue
        cls = _patched(node) if not isinstance(node, ast.ClassDef) else None
        if node.name.startswith('_') and not (cls and node.name == '__call__'): continue
        name = f'{cls}.{node.name}' if cls else node.name
        sig = _class_sig(lines, node) if isinstance(node, ast.ClassDef) else _header(lines, node)
        doc = ast.get_docstring(node) or ''
        head = re.compile(rf'^\s*(async\s+)?(def|class)\s+{re.escape(node.name)}\b')
        line = next((i + 1 for i, l in enumerate(lib_lines) if head.match(l)), None)
        src_link = f"{cfg['git_url']}/blob/{cfg['branch']}/{cfg['lib_path']}/{module}.py" + (f'#L{line}' if line else '')
        md = (f'<div class="venus-ref" id="{name.lower()}"></div>\n\n### `{name}`\n\n```python\n{sig}\n```\n\n'
              + (f'{doc}\n\n' if doc else '') + f'<small><a href="{src_link}">source</a></small>')
        out.append(md)
    return out

def plotly_html(fig, n):
    "A saved plotly figure as an HTML fragment that draws it with the site's own plotly.js (loaded by every page)"
    div = f'venus-plotly-{n}'
    data = json.dumps(fig.get('data', []))
    layout = json.dumps(fig.get('layout', {}))
    config = json.dumps(dict(responsive=True, displaylogo=False))
    height = fig.get('layout', {}).get('height') or 450
    return (f'<div id="{div}" class="plotly-graph-div" style="height:{height}px; width:100%;"></div>'
            f'<script>window.addEventListener("load", () => Plotly.newPlot("{div}", {data}, {layout}, {config}));</script>')

PLOTLY_BUNDLE = re.compile(r'<script[^>]*>\s*/\*\*?\s*\*?\s*plotly\.js v.*?</script>', re.S)
CDN_SCRIPT = re.compile(r'<script[^>]*src="https?://[^"]*"[^>]*>\s*</script>')

def html_offline(h):
    "An HTML output without the plotly.js bundle a figure inlined (every page loads the site's copy) and without scripts from the network"
    return CDN_SCRIPT.sub('', PLOTLY_BUNDLE.sub('', h))

def widget_html(out):
    "A widget output as HTML: its static view where it saved one (the replay's), with a link to the standalone export"
    data = out.get('data', {})
    text, static = (''.join(data.get(k, '')) if isinstance(data.get(k), list) else data.get(k, '')
                    for k in ('text/plain', 'text/html'))
    if text.startswith('Replay('):
        return html_offline(static) + (
            f'<p class="venus-widget">The <code>Replay</code> widget needs a running kernel{"; above, its static view" if static else ""}. '
            f'Its standalone export, <a class="venus-replay-link" href="{{root}}{REPLAY_PAGE}">the replay of the sample trajectories</a>, '
            'steps through the same chart and transcript in any browser, offline.</p>')
    return html_offline(static) if static else f'<pre>{text}</pre>'

def resolve_links(md, here, names):
    "Backticked notebook names (`24_rewards`, `nbs/explanations/method`) become links to their pages; MyST resolves `[x](NAME.ipynb)`"
    up = '../' * here.count('/')
    def tick(m):
        name = m.group(1).removeprefix('nbs/').removesuffix('.ipynb')
        return f'[`{m.group(1)}`]({up}{name}.ipynb)' if name in names and name not in ('index', here) else m.group(0)
    parts = re.split(r'(```.*?```)', md, flags=re.S)  # leave fenced code alone
    return ''.join(p if p.startswith('```') else re.sub(r'(?<![\[\w])`((?:nbs/)?[\w/]+?(?:\.ipynb)?)`(?!\])', tick, p) for p in parts)

LINK = re.compile(r'(!?)\[((?:[^\]`]|`[^`]*`)*)\]\(([^)\s]+)\)')

def home_links(md, stage, cfg):
    """The home page's markdown with README.md's links (relative to the repository root) made the site's: a notebook
    becomes its page, an image is copied beside the page, any other file or folder links to it in the repository"""
    def fix(m):
        bang, text, target = m.groups()
        if re.match(r'^([a-z]+:|#|//)', target): return m.group(0)
        path = target.split('#', 1)[0]
        if path.startswith('nbs/') and path.endswith('.ipynb'):
            return f'{bang}[{text}]({target.removeprefix("nbs/")})'
        if not (ROOT/path).exists(): raise SystemExit(f'docs/build.py: nbs/index.ipynb links {target}: no such path')
        if bang:
            (stage/path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT/path, stage/path)
            return m.group(0)
        kind = 'tree' if (ROOT/path).is_dir() else 'blob'
        return f'[{text}]({cfg["git_url"]}/{kind}/{cfg["branch"]}/{target.strip("/")})'
    parts = re.split(r'(```.*?```)', md, flags=re.S)  # leave fenced code alone
    return ''.join(p if p.startswith('```') else LINK.sub(fix, p) for p in parts)

def prepare(nb, name, module_names, cfg, counter):
    "The notebook as its page shows it"
    cells, module = [], None
    for c in nb['cells']:
        src = ''.join(c['source']) if isinstance(c['source'], list) else c['source']
        if c['cell_type'] == 'markdown':
            c['source'] = resolve_links(src, name, module_names)
            cells.append(c); continue
        if c['cell_type'] != 'code': continue
        d = directives(src)
        if 'default_exp' in d: module = d['default_exp'].split()[0]
        if {'hide', 'default_exp'} & set(d) or d.get('include') == 'false' or d.get('echo') == 'false' and not c.get('outputs'): continue
        code = strip_directives(src)
        if d.get('output') == 'false': c['outputs'] = []
        outs = []
        for o in c.get('outputs', []):
            data = o.get('data', {})
            if 'application/vnd.plotly.v1+json' in data:
                counter[0] += 1
                o['data'] = {'text/html': plotly_html(data['application/vnd.plotly.v1+json'], counter[0])}
            elif 'application/vnd.jupyter.widget-view+json' in data:
                o['data'] = {'text/html': widget_html(o).replace('{root}', '../' * name.count('/'))}
            elif 'text/html' in data:
                h = ''.join(data['text/html']) if isinstance(data['text/html'], list) else data['text/html']
                data['text/html'] = html_offline(h)
            if o.get('data') is not None: o['metadata'] = {}
            outs.append(o)
        c['outputs'], c['source'] = outs, code
        c['metadata'] = {'tags': ['remove-input']} if d.get('echo') == 'false' else {}
        if code.strip() or outs: cells.append(c)
        if 'export' in d or 'exports' in d:
            cells += [dict(cell_type='markdown', metadata={}, source=md) for md in reference(code, module, cfg)]
    for i, c in enumerate(cells): c['id'] = f'cell-{i}'
    nb['cells'], nb['nbformat'], nb['nbformat_minor'] = cells, 4, 5
    nb['metadata'] = dict(kernelspec=dict(name='python3', display_name='Python 3', language='python'),
                          language_info=dict(name='python', pygments_lexer='ipython3'))
    return nb

def toctrees(sections):
    "Hidden toctrees for the home page: Sphinx's sidebar, one caption per section"
    return '\n\n'.join(f'```{{toctree}}\n:caption: {title}\n:hidden:\n\n' + '\n'.join(names) + '\n```' for title, names in sections)

# --- the replay export ------------------------------------------------------------------------------------------

REPLAY_SCRIPT = """import sys
from venus_nb.rewards import Scored
from venus_nb.replay import random_logps, write_replay
from venus_nb.trajectory import read_jsonl
trajs = read_jsonl(sys.argv[1]).trajectories
sc = Scored.from_logps(trajs, [random_logps(t, seed=i) for i, t in enumerate(trajs)], outcome=[1.0, 0.0, 1.0][:len(trajs)])
write_replay(sys.argv[2], trajs, sc, rollout=1)"""

def replay_export(dest):
    "Start writing the standalone replay of the handwritten sample trajectories (random log p(gt), as the replay notebook's lesson)"
    return subprocess.Popen([sys.executable, '-c', REPLAY_SCRIPT, str(ROOT/'data'/'sample'/'trajectories.jsonl'), str(dest)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

# --- the build --------------------------------------------------------------------------------------------------

def build(out=ROOT/'_docs', quiet=True):
    t0, cfg, out = time.time(), settings(), Path(out).resolve()
    sections = pages()
    names = {n for _, ns in sections for n in ns}
    with tempfile.TemporaryDirectory(prefix='venus_nb-docs-') as tmp:
        stage = Path(tmp)/'src'
        extra = Path(tmp)/'extra'
        extra.mkdir(parents=True)
        replay = replay_export(extra/REPLAY_PAGE)
        counter = [0]
        for _, ns in sections:
            for n in ns:
                raw = json.loads((NBS/f'{n}.ipynb').read_text())
                if n == 'index':  # README.md's source: its links are relative to the repository root
                    for c in raw['cells']:
                        if c['cell_type'] == 'markdown': c['source'] = home_links(''.join(c['source']), stage, cfg)
                nb = prepare(raw, n, names, cfg, counter)
                if n == 'index': nb['cells'].append(dict(cell_type='markdown', metadata={}, source=toctrees(sections[1:])))
                (stage/n).parent.mkdir(parents=True, exist_ok=True)
                (stage/f'{n}.ipynb').write_text(json.dumps(nb))
        if out.exists(): shutil.rmtree(out)
        cmd = [sys.executable, '-m', 'sphinx', '-b', 'html', '-W', '--keep-going', '-c', str(DOCS), '-d', str(Path(tmp)/'doctrees'),
               str(stage), str(out)] + (['-q'] if quiet else [])
        r = subprocess.run(cmd, cwd=ROOT)
        err = replay.communicate()[1]
        if replay.returncode: raise SystemExit(f'docs/build.py: the replay export failed:\n{err[-2000:]}')
        if r.returncode: raise SystemExit(f'docs/build.py: sphinx failed (exit {r.returncode})')
        shutil.copy2(extra/REPLAY_PAGE, out/REPLAY_PAGE)
    (out/'.nojekyll').touch()  # GitHub Pages serves _static/ as it is
    print(f'docs: {sum(len(ns) for _, ns in sections)} pages in {out} ({time.time() - t0:.0f} s)')
    return out

if __name__ == '__main__':
    build(sys.argv[1] if len(sys.argv) > 1 else ROOT/'_docs')
