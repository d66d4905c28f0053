"""The tool schemas, the system prompt and the tool observations of DR-Venus against the official trajectories, and
the visit observation parsed in linear time as the old regex did."""
import json, re
from collections import Counter
import pytest
from test_web import best_time
from venus_nb import schema as S
from venus_nb.schema import parse_visit_observation, search_observation, system_prompt, visit_observation

# --- schemas and observations, against the official trajectories ---

def test_system_prompt_is_the_official_one(dr_venus_records):
    assert {r['messages'][0]['content'] for r in dr_venus_records} == {system_prompt()}

def test_observations_round_trip_the_official_tool_responses(dr_venus_records):
    kinds = Counter()
    for rec in dr_venus_records:
        for m in rec['messages']:
            if m['role'] != 'user' or not m['content'].startswith('<tool_response>\n'): continue
            body = m['content'][len('<tool_response>\n'):-len('\n</tool_response>')]
            if body.startswith('['):
                res = json.loads(body)
                kinds['search'] += 1
                assert search_observation([(r['query'], r['web_page_info_list']) for r in res]) == body
            else:
                v = parse_visit_observation(body)
                kinds['visit'] += 1
                assert v and v['evidence'] is None and visit_observation(**v).strip() == body
    assert kinds == {'search': 234, 'visit': 76}

def test_visit_observation_with_evidence_parses_back():
    obs = visit_observation('https://a.org/x', 'the year', 'It opened in 1889.', 'line one\n\nline two')
    assert obs.endswith('Summary: \nIt opened in 1889.\n\n')
    assert parse_visit_observation(obs) == dict(url='https://a.org/x', goal='the year', evidence='line one\n\nline two',
                                                summary='It opened in 1889.')
    assert parse_visit_observation('[visit error] nope') is None

def test_schemas_are_what_the_model_reads():
    assert [s['function']['name'] for s in S.TOOL_SCHEMAS] == ['search', 'visit']
    assert (S.VISIT_SCHEMA['parameters']['required'] == ['url', 'goal']
            and S.SEARCH_SCHEMA['parameters']['properties']['query']['type'] == 'array')

# ---------------------------------------------------------------------------------------------------------------------
# The visit observation parsed in linear time

def test_parse_visit_observation_is_linear():
    "The lazy regex tried every split of the text (quadratic); the parser now finds each marker once"
    def hostile(n): return 'The useful information in ' + 'x for user goal ' * n
    t1, t4 = (best_time(lambda: parse_visit_observation(hostile(2000))),
              best_time(lambda: parse_visit_observation(hostile(8000))))
    assert parse_visit_observation(hostile(10)) is None and t4 < 8 * t1 + 0.01, (t1, t4)

VISIT_RE = re.compile(r'The useful information in (.*?) for user goal (.*?) as follows: \n\n'
                      r'(?:Evidence in page: \n(.*?)\n\n)?Summary: \n(.*)', re.S)

@pytest.mark.parametrize('text', ['The useful information in u for user goal g as follows: \n\nSummary: \ns',
    'The useful information in u for user goal g as follows: \n\nEvidence in page: \ne\n\nSummary: \ns',
    ('The useful information in a for user goal b for user goal c as follows: \n\nSummary: \n'
     'x as follows: \n\nSummary: \ny'),
    'The useful information in u for user goal g as follows: \n\nnope as follows: \n\nSummary: \ns',
    ('The useful information in u for user goal g as follows: \n\nEvidence in page: \n'
     'no end as follows: \n\nSummary: \ns'),
    'The useful information in u for user goal g as follows: \n\nEvidence in page: \n\n\nSummary: \n',
    'The useful information in u for user goal g as follows: \n\nEvidence in page: \na\n\nSummary: \nb\n\nSummary: \nc',
    'The useful information in  for user goal  as follows: \n\nSummary: \n',
    'The useful information in u as follows: \n\nSummary: \ns',
    '  The useful information in u for user goal g as follows: \n\nSummary: \ns  \n'])
def test_parse_visit_observation_agrees_with_the_regex(text):
    "The linear parser gives what the old regex gave, on the cases where the markers repeat or are missing"
    m = VISIT_RE.fullmatch(text.strip())
    assert parse_visit_observation(text) == (m and dict(url=m[1], goal=m[2], evidence=m[3], summary=m[4]))
