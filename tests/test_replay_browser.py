"""The replay in a real browser (headless Debian Chromium through selenium + chromedriver): the static HTML export, and
the `Replay` widget rendered inside a running JupyterLab. Missing Chromium is installed with apt-get (needs root);
if that fails the tests skip and say why."""
import fcntl, json, os, secrets, shutil, signal, subprocess, sys, time, urllib.request
from pathlib import Path
import pytest
from conftest import ROOT
from venus_nb.base import free_port
from venus_nb.rewards import Scored
from venus_nb.replay import random_logps, write_replay
from venus_nb.trajectory import read_jsonl

CHROMIUM, DRIVER = Path('/usr/bin/chromium'), Path('/usr/bin/chromedriver')
FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-proxy-server',
         '--window-size=1500,1000']
SAMPLE = ROOT/'data'/'sample'/'trajectories.jsonl'

def _apt_install():
    "Install Debian's chromium and chromium-driver; None on success, else why not"
    if not shutil.which('apt-get'): return 'apt-get is not available on this machine'
    env = {**os.environ, 'DEBIAN_FRONTEND': 'noninteractive'}
    with open('/tmp/venus_nb-chromium-install.lock', 'w') as lock:  # pytest-xdist workers install one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        if CHROMIUM.exists() and DRIVER.exists(): return None
        for cmd in (['apt-get', 'update', '-qq'], ['apt-get', 'install', '-y', '-qq', 'chromium', 'chromium-driver']):
            r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
            if r.returncode:
                return f'`{" ".join(cmd)}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()[-300:]}'

@pytest.fixture(scope='session')
def webdriver():
    wd = pytest.importorskip('selenium.webdriver', reason='selenium is not installed (pip install selenium)')
    if not (CHROMIUM.exists() and DRIVER.exists()):
        why = _apt_install()
        if why or not (CHROMIUM.exists() and DRIVER.exists()):
            pytest.skip('headless Chromium unavailable: '
                        f'{why or "apt-get did not provide /usr/bin/chromium and /usr/bin/chromedriver"}')
    return wd

def start_chromium(webdriver, profile, flags=FLAGS):
    "Headless Chromium (Debian's binary and driver) with its own profile folder"
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for a in flags + [f'--user-data-dir={profile}']: opts.add_argument(a)
    return webdriver.Chrome(options=opts, service=Service(str(DRIVER)))

@pytest.fixture
def browser(webdriver, tmp_path):
    d = start_chromium(webdriver, tmp_path/'chromium-profile')
    yield d
    d.quit()

def sample_scored():
    trajs = read_jsonl(SAMPLE).trajectories
    return trajs, Scored.from_logps(trajs, [random_logps(t, seed=i) for i, t in enumerate(trajs)],
                                       outcome=[1.0, 0.0, 1.0])

def visible_turn(d):
    from selenium.webdriver.common.by import By
    shown = d.find_elements(By.CSS_SELECTOR, 'section.venus-turn:not([hidden])')
    assert len(shown) == 1
    return int(shown[0].get_attribute('data-turn')), shown[0].text

def test_exported_html_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    trajs, sc = sample_scored()
    traj = trajs[1]
    page = write_replay(tmp_path/'replay.html', traj, sc)
    browser.get(page.as_uri())
    js = ("return Array.from(document.querySelectorAll('#venus-chart .barlayer .trace.bars'), "
          "t => t.querySelectorAll('.point').length)")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(js))
    assert browser.execute_script(js) == [len(traj.turns)]  # one bar trace, one bar per turn
    assert visible_turn(browser)[0] == 0
    for t in (t for t in traj.turns if t.call):
        Select(browser.find_element(By.ID, 'venus-turn')).select_by_value(str(t.index))
        shown, text = visible_turn(browser)
        assert shown == t.index and f'tool call: {t.call.name}' in text
        assert json.dumps(t.call.arguments, ensure_ascii=False, indent=1).splitlines()[2].strip() in text
        gd = ("const g = document.getElementById('venus-chart'); "
              "return [g.layout.shapes[0].x0, g.data[0].selectedpoints]")
        assert browser.execute_script(gd) == [t.index - 0.5, [t.index]]
    browser.find_element(By.ID, 'venus-next').click()
    assert visible_turn(browser)[0] == len(traj.turns) - 1
    browser.save_screenshot(str(tmp_path/'replay.png'))
    assert (tmp_path/'replay.png').stat().st_size > 20_000
    fetched = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(u.startswith(('file:', 'data:', 'blob:')) for u in fetched), fetched
    browser.get(page.as_uri() + '#turn=2')
    WebDriverWait(browser, 30).until(lambda d: visible_turn(d)[0] == 2)

# --- the widget inside JupyterLab ---------------------------------------------------------------------------------

NOTEBOOK = """from venus_nb.rewards import Scored
from venus_nb.replay import Replay, random_logps
from venus_nb.trajectory import read_jsonl
trajs = read_jsonl({sample!r}).trajectories
sc = Scored.from_logps(trajs, [random_logps(t, seed=i) for i, t in enumerate(trajs)], outcome=[1.0, 0.0, 1.0])
Replay(trajs[1], sc)"""

def _get(url, timeout=5):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r: return r.status

def _wait_up(url, proc, secs=90):
    end = time.time() + secs
    while time.time() < end:
        if proc.poll() is not None: return False
        try:
            if _get(url) == 200: return True
        except OSError: time.sleep(0.5)
    return False

@pytest.fixture
def lab(tmp_path):
    "A JupyterLab server on a free loopback port, serving a notebook that renders `Replay`"
    pytest.importorskip('jupyterlab', reason='jupyterlab is not installed')
    import nbformat
    root, port, token = tmp_path/'nb', free_port(), secrets.token_hex(16)
    root.mkdir()
    cell = nbformat.v4.new_code_cell(NOTEBOOK.format(sample=str(SAMPLE)))
    nb = nbformat.v4.new_notebook(cells=[cell], metadata=dict(kernelspec=dict(name='python3', display_name='Python 3',
                                                                              language='python')))
    nbformat.write(nb, root/'replay.ipynb')
    dirs = ('JUPYTER_CONFIG_DIR', 'JUPYTER_RUNTIME_DIR', 'JUPYTERLAB_WORKSPACES_DIR', 'JUPYTERLAB_SETTINGS_DIR')
    env = {**os.environ, **{k: str(tmp_path/k.lower()) for k in dirs}}
    news = tmp_path/'jupyterlab_settings_dir'/'@jupyterlab'/'apputils-extension'/'notification.jupyterlab-settings'
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({'fetchNews': 'false'}))  # no "get notified about Jupyter news?" toast over the output
    cmd = [sys.executable, '-m', 'jupyterlab', '--no-browser', '--allow-root', '--ServerApp.ip=127.0.0.1',
           f'--ServerApp.port={port}', '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}',
           f'--ServerApp.root_dir={root}', '--LabApp.news_url=None',
           '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate', '--LabApp.extension_manager=readonly']
    log = open(tmp_path/'lab.log', 'w')
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        base = f'http://127.0.0.1:{port}'
        if not _wait_up(f'{base}/api/status?token={token}', proc):
            pytest.fail(f'JupyterLab did not start on {base}; its log:\n' + (tmp_path/'lab.log').read_text()[-2000:])
        yield f'{base}/lab/tree/replay.ipynb?token={token}'
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
        try: proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()

@pytest.mark.slow
def test_widget_renders_in_jupyterlab(browser, lab, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.action_builder import ActionBuilder
    from selenium.webdriver.support.ui import WebDriverWait
    from selenium.webdriver.support import expected_conditions as EC
    trajs, _ = sample_scored()
    browser.get(lab)
    wait = WebDriverWait(browser, 120)
    # kernel ready
    wait.until(lambda d: d.find_elements(By.XPATH,
                                         "//*[contains(@class,'jp-StatusBar')]//*[contains(text(),'| Idle')]"))
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, '.jp-Notebook .jp-Cell .cm-content'))).click()
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()  # run the cell
    out = '.jp-OutputArea-output '
    try: wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, out + '.js-plotly-plot .barlayer .trace.bars .point'))
    finally: browser.save_screenshot(str(tmp_path/'lab.png'))
    assert (len(browser.find_elements(By.CSS_SELECTOR, out + '.js-plotly-plot .barlayer .trace.bars .point'))
            == len(trajs[1].turns))
    assert (browser.find_elements(By.CSS_SELECTOR, out + '.widget-slider')
            and browser.find_elements(By.CSS_SELECTOR, out + 'table.venus-group'))
    head = lambda d: d.execute_script(f"return document.querySelector('{out}.venus-turn .venus-head')"
                                      "?.textContent || ''")
    assert head(browser).startswith('turn 0 · search')
    browser.find_element(By.XPATH,
                         "//div[contains(@class,'jp-OutputArea-output')]//button[normalize-space()='▶']").click()
    wait.until(lambda d: head(d).startswith('turn 1 · '))  # the kernel answered: the widget is live
    bar = browser.find_elements(By.CSS_SELECTOR, out + '.js-plotly-plot .barlayer .trace.bars .point')[3]
    x, y = browser.execute_script('const b = arguments[0]; b.scrollIntoView({block: "center"}); '
                                  'const r = b.getBoundingClientRect();'
                                  'return [Math.round(r.x + r.width / 2), Math.round(r.y + r.height / 2)]', bar)
    click = ActionBuilder(browser)
    click.pointer_action.move_to_location(x, y).pause(0.3).click()  # viewport coordinates: no scrolling by the driver
    click.perform()
    wait.until(lambda d: head(d).startswith('turn 3 · '))  # a click on bar 3 reached FigureWidget.on_click
    browser.save_screenshot(str(tmp_path/'lab.png'))

def test_report_xss_keeps_the_page_title(browser, tmp_path):
    "An experiment's report.html whose config holds `</pre><img onerror=...>` runs none of it in Chromium"
    from test_experiment import XSS, xss_report
    page = tmp_path/'report.html'
    page.write_text(xss_report(), encoding='utf-8')
    browser.get(page.as_uri())
    time.sleep(1)   # time for an image's onerror to fire
    assert browser.title == 'venus_nb experiment'
    assert XSS in browser.find_element('tag name', 'pre').text
