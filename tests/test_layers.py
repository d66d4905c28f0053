"Every import points down the notebook order: a module imports only modules of lower-numbered notebooks (so no cycle)."
import ast, json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

def notebook_numbers()->dict:
    "module -> the number of the notebook it is exported from (its `#| default_exp`)"
    out = {}
    for nb in sorted((ROOT/'nbs').glob('[0-9][0-9]_*.ipynb')):
        for c in json.loads(nb.read_text())['cells']:
            if m := re.search(r'^#\|\s*default_exp\s+(\S+)', ''.join(c['source']), re.M):
                out[m.group(1)] = int(nb.name[:2])
    return out

def venus_imports(tree:ast.AST)->list:
    "(module, line) of every venus_nb module an AST imports, at the top or inside a function"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ''
            if node.level == 1: names = [mod.split('.')[0]] if mod else [a.name for a in node.names]
            elif mod == 'venus_nb': names = [a.name for a in node.names]
            elif mod.startswith('venus_nb.'): names = [mod.split('.')[1]]
            else: continue
            found += [(n, node.lineno) for n in names]
        elif isinstance(node, ast.Import):
            found += [(a.name.split('.')[1], node.lineno) for a in node.names if a.name.startswith('venus_nb.')]
    return sorted(found, key=lambda x: x[1])

def upward(numbers:dict)->list:
    "'module:line imports other (NN > MM)' for each import of a module of a higher-numbered (or the same) notebook"
    bad = []
    for mod, n in numbers.items():
        for other, line in venus_imports(ast.parse((ROOT/'venus_nb'/f'{mod}.py').read_text())):
            if other in numbers and other != mod and numbers[other] >= n:
                bad.append(f'{mod}:{line} imports {other} ({numbers[other]:02d} >= {n:02d})')
    return bad

def test_every_module_has_one_notebook():
    numbers = notebook_numbers()
    mods = {p.stem for p in (ROOT/'venus_nb').glob('*.py') if not p.stem.startswith('_')}
    assert mods == set(numbers), (mods ^ set(numbers))

def test_every_import_points_down_the_notebook_order():
    assert upward(notebook_numbers()) == []

def test_an_upward_import_is_found(tmp_path):
    "The check itself: a function-body import of a later notebook's module is named, with its line"
    tree = ast.parse('def f():\n    from venus_nb.cli import main\nfrom .base import x\nimport venus_nb.demo\n')
    assert venus_imports(tree) == [('cli', 2), ('base', 3), ('demo', 4)]
