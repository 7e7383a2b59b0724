"""The sandbox agent's script rules (services/sandbox/agent.py `run_script`): what a config's
`#sandbox:` lines say running it gives. Pure; nothing faked."""

from __future__ import annotations

from services.sandbox.agent import ScriptRun, run_script, same_origin


def test_a_script_without_directives_succeeds_at_once_with_no_output() -> None:
    assert run_script("#!/bin/sh\necho hi\n", {}) == ScriptRun()
    assert run_script({"structured": True}, {}) == ScriptRun()


def test_directives_give_exit_code_streams_outputs_and_run_time_with_inputs_substituted() -> None:
    script = """#!/bin/sh
#sandbox: stdout hello ${who}
# sandbox: stdout second line
#sandbox: stderr warning: $who
#sandbox: output result=${who}=1
#sandbox: exit 3
#sandbox: seconds 1.5
"""
    run = run_script(script, {"who": "alice"})
    assert run == ScriptRun(3, "hello alice\nsecond line\n", "warning: alice\n", {"result": "alice=1"}, 1.5)
    assert run.signal() == {
        "deploy_stdout": "hello alice\nsecond line\n",
        "deploy_stderr": "warning: alice\n",
        "deploy_status_code": 3,
        "result": "alice=1",
    }


def test_bad_numbers_fall_back_and_the_run_time_is_bounded() -> None:
    run = run_script("#sandbox: exit lots\n#sandbox: seconds 99999\n#sandbox: seconds -1\n", {})
    assert (run.status_code, run.seconds) == (0, 0.0)
    assert run_script("#sandbox: seconds 99999\n", {}).seconds == 600.0


def test_a_directive_naming_actions_applies_only_when_run_for_one_of_them() -> None:
    script = """#sandbox: stdout ran ${deploy_action}
#sandbox[DELETE]: exit 3
#sandbox[suspend, RESUME]: stderr paused or resumed
"""
    assert run_script(script, {"deploy_action": "CREATE"}) == ScriptRun(0, "ran CREATE\n")
    assert run_script(script, {"deploy_action": "DELETE"}) == ScriptRun(3, "ran DELETE\n")
    assert run_script(script, {"deploy_action": "RESUME"}).stderr == "paused or resumed\n"
    assert run_script(script, {}) == ScriptRun(0, "ran ${deploy_action}\n"), "no action: unqualified lines"


def test_the_agent_puts_to_a_signal_url_only_on_its_own_api_origin() -> None:
    api = "http://127.0.0.1:8004/v1/demo"
    assert same_origin("http://127.0.0.1:8004/v1/demo/software_deployments/d/signal/t", api)
    assert not same_origin("http://127.0.0.1:8005/v1/demo/software_deployments/d/signal/t", api)
    assert not same_origin("https://127.0.0.1:8004/x", api)
    assert not same_origin("http://169.254.169.254/latest", api)
    assert not same_origin("file:///etc/passwd", "file:///etc")
