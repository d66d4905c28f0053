"Malformed input never crashes the parser: a broken turn is `invalid` with a reason; a broken record is a load error."
from hypothesis import given, settings, strategies as st, HealthCheck
from venus_nb.trajectory import Trajectory, check_format, read_jsonl

TAGS = ['<think>', '</think>', '<tool_call>', '</tool_call>', '<answer>', '</answer>', '<tool_response>', '{', '}',
        '"name"', ':', '"search"', '"arguments"', 'Action: search[', ']', '\n']
texty = st.lists(st.one_of(st.sampled_from(TAGS), st.text(max_size=8)), max_size=20).map(''.join)
content = st.one_of(texty, st.none(), st.integers(),
                    st.lists(st.one_of(texty, st.dictionaries(st.text(max_size=4), texty, max_size=2)), max_size=3))
message = st.fixed_dictionaries({'role': st.sampled_from(['system', 'user', 'assistant', 'tool'])},
                                optional={'content': content, 'tool_calls': st.lists(st.dictionaries(
                                    st.sampled_from(['function', 'name', 'arguments', 'id']),
                                    st.one_of(texty, st.dictionaries(st.sampled_from(['name', 'arguments']), texty))),
                                    max_size=2)})

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(message, max_size=8))
def test_any_messages_parse(msgs):
    t = Trajectory.from_messages(msgs)
    assert t.to_messages() == msgs
    for turn in t.turns:
        assert turn.kind in {'search', 'visit', 'answer', 'other', 'invalid'}
        assert (turn.kind == 'invalid') == (turn.parse_error is not None or (turn.call is None and turn.answer is None))
    t._repr_markdown_()

@settings(max_examples=300, deadline=None)
@given(texty, st.booleans())
def test_checker_always_answers(text, final):
    r = check_format(text, final)
    assert r is None or isinstance(r, str)

@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.binary(max_size=40).map(lambda b: b.decode('latin-1')), st.just('{"messages": [1]}'),
                          st.just('{"messages": []}'), st.just('[]'), st.just('{"question": 3}')), max_size=6))
def test_garbage_lines_become_load_errors(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp('j')/'t.jsonl'
    lines = [l.replace('\n', ' ').replace('\r', ' ') for l in lines]
    p.write_text('\n'.join(lines), encoding='utf-8')
    got = read_jsonl(p)
    nonblank = sum(1 for l in lines if l.strip())
    assert len(got.trajectories) + len(got.errors) == nonblank
