from workbench.toolschemas.specs import arguments_error, function_spec, name_error, parameters_error

SCHEMA = {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}


def test_valid_parameters():
    assert parameters_error(SCHEMA) is None


def test_invalid_json_schema_is_reported_with_its_path():
    bad = {"type": "object", "properties": {"x": {"type": "strin"}}}
    message = parameters_error(bad)
    assert message.startswith("not a valid JSON Schema at properties/x/type: 'strin' is not valid")


def test_parameters_must_describe_an_object():
    assert (
        parameters_error({"type": "string"})
        == 'the arguments of a function are an object: set "type": "object"'
    )
    assert parameters_error([1]) == "must be a JSON object (a JSON Schema)"


def test_function_names():
    assert name_error("calc_v2-x") is None
    assert name_error("bad name") == "use 1-64 letters, digits, underscores or hyphens"


def test_arguments_checked_against_schema():
    assert arguments_error(SCHEMA, {"expression": "1+1"}) is None
    assert arguments_error(SCHEMA, {}) == "'expression' is a required property"
    assert arguments_error(SCHEMA, {"expression": 3}) == "at expression: 3 is not of type 'string'"


def test_function_spec_shape():
    spec = function_spec(name="calc", description="d", parameters=SCHEMA)
    assert spec == {
        "type": "function",
        "function": {"name": "calc", "description": "d", "parameters": SCHEMA},
    }
