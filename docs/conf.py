# Sphinx configuration of the documentation site (`make docs`; docs/build.py stages the notebooks and runs Sphinx).
# Title, description, author and repository come from settings.ini, the file nbdev reads too.
import configparser, html, shutil
from pathlib import Path
import mathjax, plotly

ROOT = Path(__file__).resolve().parents[1]
_cp = configparser.ConfigParser(interpolation=None)
_cp.read(ROOT/'settings.ini')
ini = _cp['DEFAULT']

project = ini['title']
author = ini['author']
copyright = ini['copyright']
release = version = ini['version']
html_title = ini['title']
html_baseurl = ini['doc_host'].rstrip('/') + ini.get('doc_baseurl', '/').rstrip('/') + '/'

extensions = ['myst_nb']
nb_execution_mode = 'off'          # the notebooks' saved outputs are the pages: nothing is run
nb_merge_streams = True
nb_output_stderr = 'remove'        # warnings a library printed while the notebook ran
myst_enable_extensions = ['dollarmath']
# math: MathJax 3 from the django-static-mathjax package (MathJax's release as Python package data, no Django needed),
# served from _static/mathjax/ (_mathjax below): the site needs no network for math either
MATHJAX = Path(mathjax.__file__).parent/'static'/'mathjax'
mathjax_path = 'mathjax/tex-chtml-full.js'  # relative: under _static/; every TeX extension in it, none loaded later
myst_heading_anchors = 3
exclude_patterns = ['**.ipynb_checkpoints']
suppress_warnings = ['mystnb.unknown_mime_type', 'myst.header']  # reference entries are H3, as nbdev's

html_theme = 'furo'
html_static_path = ['_static']
html_css_files = ['venus.css']
html_js_files = ['plotly.min.js']  # plotly figures are drawn with this copy: the site needs no network
html_show_sourcelink = False
html_copy_source = False
html_theme_options = dict(
    source_repository=ini['git_url'] + '/', source_branch=ini['branch'], source_directory='nbs/',
    footer_icons=[dict(name='GitHub', url=ini['git_url'], class_='',
                       html='<svg viewBox="0 0 16 16" width="1.2em" height="1.2em" fill="currentColor"><path d="M8 0C3.58 0 0 3.58 0 8c0 3.54 2.29 6.53 5.47 7.59.4.07.55-.17.55-.38 0-.19-.01-.82-.01-1.49-2.01.37-2.53-.49-2.69-.94-.09-.23-.48-.94-.82-1.13-.28-.15-.68-.52-.01-.53.63-.01 1.08.58 1.23.82.72 1.21 1.87.87 2.33.66.07-.52.28-.87.51-1.07-1.78-.2-3.64-.89-3.64-3.95 0-.87.31-1.59.82-2.15-.08-.2-.36-1.02.08-2.12 0 0 .67-.21 2.2.82.64-.18 1.32-.27 2-.27.68 0 1.36.09 2 .27 1.53-1.04 2.2-.82 2.2-.82.44 1.1.16 1.92.08 2.12.51.56.82 1.27.82 2.15 0 3.07-1.87 3.75-3.65 3.95.29.25.54.73.54 1.48 0 1.07-.01 1.93-.01 2.2 0 .21.15.46.55.38A8.013 8.013 0 0016 8c0-4.42-3.58-8-8-8z"></path></svg>')],
)

def _meta(app, pagename, templatename, context, doctree):
    context['metatags'] = context.get('metatags', '') + f'<meta name="description" content="{html.escape(ini["description"])}">'

def _plotly_js(app, exc):
    "The plotly.js of the installed plotly package, the one that drew the figures in the notebooks"
    if exc is None and app.builder.format == 'html':
        shutil.copy2(Path(plotly.__file__).parent/'package_data'/'plotly.min.js', Path(app.outdir)/'_static'/'plotly.min.js')

def _mathjax(app, exc):
    "MathJax's one script, its CommonHTML fonts (which it finds beside itself) and its licence; not its 30 MB rest"
    if exc is None and app.builder.format == 'html':
        dest, es5 = Path(app.outdir)/'_static'/'mathjax', MATHJAX/'es5'
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(es5/mathjax_path.split('/', 1)[1], dest)
        shutil.copy2(MATHJAX/'LICENSE', dest)
        fonts = Path('output')/'chtml'/'fonts'/'woff-v2'
        shutil.copytree(es5/fonts, dest/fonts, dirs_exist_ok=True)

def setup(app):
    app.connect('html-page-context', _meta)
    app.connect('build-finished', _plotly_js)
    app.connect('build-finished', _mathjax)
