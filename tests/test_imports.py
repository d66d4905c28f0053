"Modules import only what they need: training code never pulls in the replay widget's plotting stack."
import os, subprocess, sys
import pytest
from conftest import ROOT

CHECK = """import sys
heavy = lambda: sorted({m.split('.')[0] for m in sys.modules} & {'plotly', 'ipywidgets'})
import venus_nb.igpo, venus_nb.rewards
print(heavy())
import venus_nb.replay
print(heavy())"""

def test_igpo_imports_without_plotting_stack():
    "IGPO and the rewards import no plotly or ipywidgets; the replay does (so the check can see them)"
    r = subprocess.run([sys.executable, '-c', CHECK], cwd=ROOT, env={**os.environ, 'PYTHONPATH': str(ROOT)},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-2:] == ['[]', "['ipywidgets', 'plotly']"]

# --- each public name has one home; names that moved keep their old import path for a while, with a warning ---

RECORDS = ['MAX_RECORD_BYTES', 'MAX_DEPTH', 'BadRecord', 'LoadError', 'must_exist', 'decode_utf8', 'parse_json',
           'jsonl_records', 'atomic_open', 'write_atomic']
# what `tools` star-re-exported from its backends (less what `RENAMED` lists)
WEB = ['TEXT_TYPES', 'REDIRECTS', 'EXTRACTOR_PROMPT', 'SERPER_URL', 'ToolConfig', 'ToolError', 'retry_after',
       'backoff_delay', 'embedded_ipv4', 'address_error', 'redact_url', 'url_error', 'safe_address', 'pinned',
       'Fetched', 'send', 'fetch_page', 'make_client', 'Page', 'media_type', 'sniff', 'decode', 'html_to_text',
       'page_of', 'extractor_messages', 'parse_extraction', 'ChatSummariser', 'openai_chat', 'serper_hits',
       'searxng_hits', 'WebSearch', 'WebReader', 'Cache', 'ReplayMiss', 'exchange_key', 'Cassette']
CORPUS = ['DOC_FORMATS', 'BM25', 'passages', 'extractive_summary', 'Doc', 'url_key', 'snippet', 'LocalCorpus',
          'title_id', 'wiki_url', 'jsonl_doc', 'hipporag_doc', 'search_r1_doc', 'kilt_doc', 'detect_format',
          'read_docs', 'load_corpus', 'write_docs', 'parse_r1_passage', 'r1_passages', 'passage_docs']

# old module -> {new home -> the names that moved there}
DEPRECATED = {'rewards': {'judges': ['LLMJudge', 'exact_match', 'f1_score', 'judge_fn', 'outcomes', 'JUDGE_PROMPT',
                                     'normalize_answer']},
              'igpo': {'judges': ['imported', 'untrusted'], 'rollout': ['UnslothEngine']},
              'sft': {'checkpoints': ['newest_whole', 'first_problem', 'TRACKERS', 'one_line']},
              'experiment': {'data': ['question_kind']},
              'cli': {'demo': ['step_load', 'turn_rewards_page', 'demo_igpo_config']},
              'trajectory': {'base': RECORDS},
              'web': {'base': ['save_config', 'load_config']},
              'eval': {'corpus': ['parse_r1_passage', 'r1_passages', 'passage_docs']},
              'replay': {'rewards': ['Scored']},
              'served': {'base': ['free_port']},
              'ranks': {'base': ['free_port']},
              'tools': {'web': WEB, 'corpus': CORPUS,
                        'base': ['LoadError', 'atomic_open', 'write_atomic', 'save_config', 'load_config']}}

# old module -> {old name -> `home.new_name`}: names renamed because two modules gave one name to different things
RENAMED = {'web': {'resolve': 'web.resolve_host', 'JSON5_MAX_CHARS': 'web.EXTRACTION_JSON5_MAX_CHARS'},
           'tools': {'resolve': 'web.resolve_host', 'JSON5_MAX_CHARS': 'web.EXTRACTION_JSON5_MAX_CHARS'},
           'eval': {'TOOL_KINDS': 'eval.CALL_KINDS'},
           'igpo': {'adapter_base': 'igpo.rl_adapter_base'},
           'synth': {'search_observation': 'synth.synthetic_search_observation',
                     'visit_observation': 'synth.synthetic_visit_observation'}}

def _moves():
    "(old module, name, new module, new name) for every entry of `DEPRECATED` and `RENAMED`"
    import importlib
    mod = lambda m: importlib.import_module(f'venus_nb.{m}')
    for old, homes in DEPRECATED.items():
        for home, names in homes.items():
            for n in names: yield mod(old), n, mod(home), n
    for old, names in RENAMED.items():
        for n, new in names.items():
            home, new = new.split('.')
            yield mod(old), n, mod(home), new

def test_moved_names_still_import_from_their_old_modules():
    "What moved (or was renamed) is the same object under its old path, and no longer in the old module's `__all__`"
    import warnings
    for mod, n, new, m in _moves():
        assert n not in mod.__all__, f'{mod.__name__}.__all__ still lists {n}'
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            assert getattr(mod, n) is getattr(new, m), f'{mod.__name__}.{n}'
    from venus_nb import eval, judges
    assert eval.norm_text is judges.normalize_answer

def test_moved_names_warn_and_give_the_object_from_their_new_home():
    "The old path warns, naming the new home, unless the old module imports the name for its own use"
    import warnings
    for mod, n, new, m in _moves():
        if n in vars(mod): continue   # imported there for the module's own use: no alias needed
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter('always')
            got = getattr(mod, n)
        where = new.__name__ + ('' if m == n else f'.{m}')
        assert (got is getattr(new, m)
                and any(issubclass(w.category, DeprecationWarning) and where in str(w.message) for w in seen)), (
            f'{mod.__name__}.{n}')
    import venus_nb.rewards as r
    with pytest.raises(AttributeError, match='no_such_name'): r.no_such_name
    from venus_nb import tools
    with pytest.warns(DeprecationWarning, match='import it from venus_nb.corpus'): tools.load_corpus

def test_every_public_name_has_one_home():
    "No name is in two modules' `__all__`"
    import ast, collections
    homes = collections.defaultdict(list)
    for f in sorted((ROOT/'venus_nb').glob('*.py')):
        tree = ast.parse(f.read_text())
        alls = [ast.literal_eval(n.value) for n in tree.body
                if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == '__all__']
        for name in (alls[0] if alls else []): homes[name].append(f.stem)
    assert not (twice := {n: ms for n, ms in homes.items() if len(ms) > 1}), twice

def test_moved_tables_list_only_names_the_module_lacks():
    "A name the old module still imports for its own use never reaches `__getattr__`: listing it there would be dead"
    import importlib
    for old in sorted({*DEPRECATED, *RENAMED}):
        mod = importlib.import_module(f'venus_nb.{old}')
        homes = getattr(vars(mod).get('__getattr__'), 'homes', {})
        assert not (dead := sorted(set(homes) & set(vars(mod)))), f'{old}: {dead}'
