"The README's figures are files in the repository, and each published figure draws what its tables hold"
import re
from conftest import ROOT
from venus_nb.select import read_selection

def test_readme_figures_are_committed_files():
    "Every image the README shows is a file in the repository (`make readme` extracts the index's figures)"
    figures = re.findall(r'!\[[^\]]*\]\(([^)\s]+)\)', (ROOT/'README.md').read_text())
    assert figures and [f for f in figures if not (ROOT/f).is_file()] == [], figures

def test_selection_figure_draws_every_selector_measured():
    "The warm start's selection figure (README and `33_select`) has a line for each selector in its table"
    folder = ROOT/'examples'/'select'/'warm_start'
    svg, table = (folder/'selection.svg').read_text(), read_selection(folder).table
    assert [s for s in table.selector.unique() if f'>{s}<' not in svg] == []
