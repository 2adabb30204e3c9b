from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.rayvllm.fleet.plugins.module_utils.checks.values import flag_values

FLAGS = ("--tool-call-parser", "--enable-auto-tool-choice", "--chat-template")


def test_flag_values_reads_each_way_a_flag_is_written():
    args = ["--enforce-eager", "--tool_call_parser=hermes", "--enable-auto-tool-choice", "--chat-template", "/t.jinja"]
    assert flag_values(args, FLAGS) == {
        "--tool-call-parser": "hermes",
        "--enable-auto-tool-choice": True,
        "--chat-template": "/t.jinja",
    }
    # A flag followed by another flag, or last, is given alone.
    assert flag_values(["--chat-template", "--enforce-eager"], FLAGS) == {"--chat-template": True}
    assert flag_values(["--tool-call-parser"], FLAGS) == {"--tool-call-parser": True}


@given(
    st.one_of(
        st.none(),
        st.text(),
        st.integers(),
        st.dictionaries(st.text(), st.text()),
        st.lists(st.one_of(st.text(), st.integers(), st.none())),
    )
)
def test_flag_values_never_raises_and_never_reads_a_string_as_a_list(args):
    found = flag_values(args, FLAGS)
    assert set(found) <= set(FLAGS)
    if not isinstance(args, list):
        assert found == {}
