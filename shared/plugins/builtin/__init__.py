"""Built-in resource types, registered through `converge.resources` like any plugin.

One module per family:
- `testresource`: OS::Heat::TestResource (Heat's knob-driven test type);
- `placeholders`: OS::Heat::None and OS::Heat::Value;
- `random_string`: OS::Heat::RandomString;
- `wait_condition`: OS::Heat::WaitConditionHandle and OS::Heat::WaitCondition;
- `delay`: OS::Heat::Delay (a pause watched by the observer);
- `http_resource`: Converge::HTTP::Resource (any REST API);
- `common`: physical names, keyed randomness, pending-action markers.
"""
