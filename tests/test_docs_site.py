"""The documentation site (`make docs`): built from the notebooks' saved outputs into a temporary folder, then read as
files (every internal link and anchor resolves, every notebook has a page, in the README's pipeline order) and opened
in headless Chromium from disk, with no server and no network: a plotly figure draws, search answers, the replay
export opens, the method page's math is typeset by the site's own MathJax."""
import configparser, re, subprocess, sys
from html import unescape
from pathlib import Path
from urllib.parse import unquote, urldefrag
import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # the build alone takes about a minute on 2 cores
CHROMIUM, DRIVER = Path('/usr/bin/chromium'), Path('/usr/bin/chromedriver')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync', '--no-proxy-server', '--window-size=1400,1000',
         '--host-resolver-rules=MAP * ~NOTFOUND']  # no host name resolves: the pages must need no network

def notebooks():
    "Every notebook of nbs/ a reader should find, relative and without .ipynb"
    return sorted(p.relative_to(ROOT/'nbs').with_suffix('').as_posix() for p in (ROOT/'nbs').rglob('*.ipynb')
                  if not any(s.startswith(('.', '_')) or s == 'out' for s in p.relative_to(ROOT/'nbs').parts[:-1])
                  and not p.name.startswith('_'))

def pipeline_order():
    "The numbered notebooks in the pipeline's order (as the README's table lists them), then explanations and tutorials"
    table = (ROOT/'README.md').read_text().split('## The pipeline', 1)[1].split('\n## ', 1)[0]
    listed = [n for row in table.splitlines() if row.startswith('|')
              for n in re.findall(r'`(\d\d_\w+)`', row.split('|')[2])]
    numbered = [n for n in notebooks() if re.match(r'\d\d_', n)]
    assert [n for n in numbered if n in listed] == listed, 'the README lists the notebooks out of their numbers\' order'
    rest = [n for n in notebooks() if n != 'index' and n not in numbered]
    return ['index'] + numbered + sorted(rest, key=lambda n: (not n.startswith('explanations/'),
                                                              n != 'tutorials/recipe', n))

SCRIPT = re.compile(r'(<script\b[^>]*>).*?</script>', re.S)
ATTR = re.compile(r'<(\w+)\b[^>]*?\s(href|src|id|name)="([^"]*)"')

def parse(page):
    "(links, ids) of an HTML page: every href and src (the first attribute a tag has), every id"
    links, ids = [], set()
    # markup inside inlined JavaScript is not a link
    text = SCRIPT.sub(r'\1</script>', page.read_text(errors='replace'))
    for tag, attr, value in ATTR.findall(text):
        if attr in ('id', 'name'): ids.add(unescape(value))
        else: links.append(unescape(value))
    return links, ids

@pytest.fixture(scope='module')
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp('site')/'_docs'
    r = subprocess.run([sys.executable, 'docs/build.py', str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
    return out

def test_every_notebook_has_a_page_in_pipeline_order(site):
    order = pipeline_order()
    assert sorted(order) == notebooks()
    for n in order: assert (site/f'{n}.html').exists(), f'no page for nbs/{n}.ipynb'
    index = (site/'index.html').read_text()
    sidebar = index.split('class="sidebar-tree"', 1)[1].split('</div>', 1)[0]
    hrefs = [h.removesuffix('.html') for h in re.findall(r'class="reference internal" href="([^"#]+)"', sidebar)]
    assert hrefs == order[1:], hrefs

def test_no_broken_internal_links(site):
    parsed = {p: parse(p) for p in sorted(site.rglob('*.html'))}
    bad, checked = [], 0
    for p, (links, _) in parsed.items():
        for link in links:
            if re.match(r'^([a-z]+:|//)', link): continue  # external (https:, mailto:, data:)
            path, frag = urldefrag(link)
            path = path.split('?', 1)[0]  # Sphinx's cache-busting ?v=
            target = (p.parent/unquote(path)).resolve() if path else p
            if target.is_dir(): target = target/'index.html'
            checked += 1
            assert not path.endswith('.ipynb'), f'{p.relative_to(site)} links a notebook file: {link}'
            if not target.exists(): bad.append(f'{p.relative_to(site)} -> {link}')
            elif frag and target in parsed and unquote(frag) not in parsed[target][1]:
                bad.append(f'{p.relative_to(site)} -> {link} (no anchor)')
    assert checked > 500 and not bad, bad[:20]

FETCHED = re.compile(r'<(script|link)\b[^>]*>')

def test_nothing_loaded_from_the_network(site):
    "No page loads a script or a stylesheet from another host (MathJax from a CDN was one)"
    bad = []
    for p in sorted(site.rglob('*.html')):
        for m in FETCHED.finditer(SCRIPT.sub(r'\1</script>', p.read_text(errors='replace'))):
            tag = m.group(0)
            if m.group(1) == 'link' and not re.search(r'rel="(stylesheet|preload|modulepreload|icon)"', tag): continue
            url = re.search(r'\s(?:src|href)="([^"]*)"', tag)
            if url and re.match(r'^([a-z]+:)?//', url.group(1)): bad.append(f'{p.relative_to(site)}: {tag}')
    assert not bad, bad[:10]
    assert (site/'_static'/'mathjax'/'tex-chtml-full.js').exists()

def test_settings_and_reference(site):
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(ROOT/'settings.ini')
    ini = cp['DEFAULT']
    index = (site/'index.html').read_text()
    assert f'<title>{ini["title"]}' in index and f'content="{ini["description"]}"' in index and ini['git_url'] in index
    traj = (site/'01_trajectory.html').read_text()
    assert '#|' not in traj  # nbdev's directives are not shown
    # exported functions and classes have reference entries: their signature and docstring, and a link to their source
    assert (re.search(r'<h3>.*?read_jsonl.*?</h3>', traj)
            and f'{ini["git_url"]}/blob/{ini["branch"]}/venus_nb/trajectory.py#L' in traj)

@pytest.fixture(scope='module')
def browser(tmp_path_factory):
    wd = pytest.importorskip('selenium.webdriver', reason='selenium is not installed (pip install selenium)')
    if not (CHROMIUM.exists() and DRIVER.exists()):
        from conftest import _apt_install  # the replay test installs Debian's chromium as root
        why = _apt_install()
        if why or not (CHROMIUM.exists() and DRIVER.exists()): pytest.skip(f'headless Chromium unavailable: {why}')
    from conftest import start_chromium
    d = start_chromium(wd, tmp_path_factory.mktemp('chromium'), FLAGS)
    yield d
    d.quit()

def offline(browser):
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    return [u for u in fetched if not u.startswith(('file:', 'data:', 'blob:'))]

def test_pages_in_chromium(site, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    # a plotly figure saved in a notebook draws from the site's own plotly.js
    browser.get((site/'11_data.html').as_uri())
    drawn = "return document.querySelectorAll('.js-plotly-plot .main-svg').length"
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(drawn))
    assert browser.execute_script("return typeof Plotly") == 'object' and not offline(browser)
    # the replay widget's page links its standalone export, which opens with its chart
    browser.get((site/'30_replay.html').as_uri())
    link = browser.find_element(By.CSS_SELECTOR, 'a.venus-replay-link')
    browser.execute_script('arguments[0].scrollIntoView(); arguments[0].click()', link)
    bars = "return document.querySelectorAll('#venus-chart .barlayer .trace.bars .point').length"
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(bars))
    assert browser.current_url.endswith('/replay.html') and not offline(browser)
    # search answers offline, from the page itself
    browser.get((site/'search.html').as_uri() + '?q=information_gain')
    hits = "return Array.from(document.querySelectorAll('#search-results li a'), a => a.getAttribute('href'))"
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(hits))
    assert any(h.startswith('27_scoring.html') for h in browser.execute_script(hits))
    # the tutorials' pages open from the sidebar, two folders deep
    browser.get((site/'tutorials'/'experiment.html').as_uri())
    browser.execute_script('arguments[0].click()', browser.find_element(By.LINK_TEXT, 'Replay'))
    assert browser.current_url.endswith('/30_replay.html')
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(drawn))

# resolves once MathJax has typeset the page and the fonts it asked for have loaded; else says why not
MATHJAX_DONE = """const done = arguments[arguments.length - 1];
if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return done('MathJax did not load');
MathJax.startup.promise.then(() => document.fonts.ready).then(() => done(null), e => done(String(e)));"""

def test_math_in_chromium(site, browser):
    from selenium.webdriver.common.by import By
    # the method page's formulas ($...$, $$...$$) are typeset offline by the site's copy of MathJax, with its fonts
    browser.get((site/'explanations'/'method.html').as_uri())
    browser.set_script_timeout(30)
    assert browser.execute_async_script(MATHJAX_DONE) is None, browser.get_log('browser')[-5:]
    n, typeset, errors = browser.execute_script("""return [document.querySelectorAll('.math').length,
        document.querySelectorAll('.math > mjx-container').length, document.querySelectorAll('mjx-merror').length]""")
    assert n >= 10 and typeset == n and not errors, (n, typeset, errors)
    fonts = browser.execute_script("return Array.from(document.fonts, f => [f.family, f.status])")
    used = {f: s for f, s in fonts if f.startswith('MJX') and s != 'unloaded'}
    assert used.get('MJXTEX-I') == 'loaded' and set(used.values()) == {'loaded'}, used
    text = browser.find_element(By.TAG_NAME, 'article').text
    assert not re.search(r'\\[\[\]()]|\\frac|\$\$', text), 'raw TeX left on the page'
    assert not offline(browser)
