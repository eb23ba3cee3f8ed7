"""BOTS's parameters are defined once: each default and range in the catalogue
(``bots_rft.parameters``), one frozen :class:`BOTSParams` value that every BOTS backend
takes, and the estimators, the Trinity adapter and the simulator reading the same catalogue. No
literal default of a catalogued parameter is written anywhere else in the package: the scan
below reads every function signature, dataclass field and ``.get(name, default)`` of the
package, so a default fixed in one place cannot silently differ in another."""

from __future__ import annotations

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest

import bots_rft
from bots_rft import BOTS, Interpolation
from bots_rft.errors import InvalidArgumentError, InvalidTypeError
from bots_rft.estimators import EmbeddingRegression, MultiReference
from bots_rft.parameters import CATALOGUE, LAM, MIN_GAP, MOMENTUM, PARAMETERS, PRIOR_PRECISION
from bots_rft.selector.backends.sharded import SHARDED_PARAMS, ShardedBOTS
from bots_rft.selector.bots import SETTABLE_PARAMS, BOTSParams

PACKAGE = Path(bots_rft.__file__).parent
#: Names that hold a catalogued parameter's value under another name, or BOTS's priors.
_ALSO = {"forgetting", "prior_alpha", "prior_beta"}
#: Where ``seed`` names a selector's stream (elsewhere it seeds data, sampling or a whole run).
_SELECTOR_SEED_HOMES = ("selector", "integrations", "simulate")


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float))


def _literal_defaults(path: Path) -> list[str]:
    """Every literal number or bool written as the default of a catalogued parameter in ``path``."""
    names = {p.name for p in CATALOGUE} | _ALSO
    relative = path.relative_to(PACKAGE)
    if relative.parts[0] not in _SELECTOR_SEED_HOMES:
        names.discard("seed")
    found: list[str] = []

    def note(line: int, name: str, value: ast.AST) -> None:
        found.append(f"{relative}:{line}: {name} = {ast.unparse(value)}")

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = [
                *zip(positional[len(positional) - len(a.defaults) :], a.defaults),
                *zip(a.kwonlyargs, a.kw_defaults),
            ]
            for arg, default in pairs:
                if arg.arg in names and _literal(default):
                    assert default is not None
                    note(node.lineno, arg.arg, default)
        elif isinstance(node, ast.ClassDef):
            for st in node.body:
                named = isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.target.id in names
                if named and isinstance(st, ast.AnnAssign) and _literal(st.value):
                    assert isinstance(st.target, ast.Name) and st.value is not None
                    note(st.lineno, st.target.id, st.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and len(node.args) == 2:
            key, default = node.args
            getter = node.func.attr in ("get", "pop", "setdefault") and isinstance(key, ast.Constant)
            if getter and isinstance(key, ast.Constant) and key.value in names and _literal(default):
                note(node.lineno, f"{node.func.attr}({key.value!r})", default)
    return found


def test_no_catalogued_parameter_has_a_literal_default_anywhere_in_the_package() -> None:
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) for hit in _literal_defaults(path)]
    assert found == [], "defaults written out instead of read from the catalogue:\n" + "\n".join(found)


def test_the_scan_finds_a_planted_literal_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    planted = tmp_path / "selector" / "planted.py"
    planted.parent.mkdir()
    planted.write_text(
        "from dataclasses import dataclass\n"
        "def f(x, *, lam: float = 0.1, seed: int = 0): ...\n"
        "@dataclass\nclass C:\n    momentum: float = 0.9\n"
        "def g(cfg):\n    return cfg.get('tau', 0.0)\n"
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    assert _literal_defaults(planted) == [
        "selector/planted.py:2: lam = 0.1",
        "selector/planted.py:2: seed = 0",
        "selector/planted.py:5: momentum = 0.9",
        "selector/planted.py:7: get('tau') = 0.0",
    ]


def test_bots_params_fields_are_the_catalogue_s_parameters_at_their_defaults() -> None:
    default = BOTSParams()
    for f in fields(BOTSParams):
        assert getattr(default, f.name) == PARAMETERS[f.name].default, f.name
    assert set(BOTSParams.names()) == set(SETTABLE_PARAMS) | {"seed"} == set(SHARDED_PARAMS)
    with pytest.raises(AttributeError):
        default.lam = 0.5  # type: ignore[misc]


def test_bots_signature_takes_its_defaults_from_bots_params() -> None:
    signature = inspect.signature(BOTS).parameters
    for name in BOTSParams.names():
        assert signature[name].default == getattr(BOTSParams(), name), name
    assert BOTS(3).params == {name: getattr(BOTSParams(), name) for name in BOTS(3).params}


@pytest.mark.parametrize(
    ("name", "value"),
    [("lam", 1.5), ("rho", -0.1), ("target", float("nan")), ("tau", -1.0), ("n_rollouts", 0), ("lag_discount", 0.0)],
)
def test_every_backend_refuses_a_bad_value_with_the_catalogue_s_message(name: str, value: float) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        PARAMETERS[name].check(value)
    expected = str(caught.value)
    for build in (
        lambda: BOTSParams(**{name: value}),
        lambda: BOTS(4, **{name: value}),
        lambda: BOTS(4, backend="torch", device="cpu", **{name: value}),
        lambda: ShardedBOTS(4, **{name: value}),  # refused before any Ray actor starts
    ):
        with pytest.raises(InvalidArgumentError) as refused:
            build()
        assert str(refused.value) == expected and refused.value.argument == name
    sel = BOTS(4)
    with pytest.raises(InvalidArgumentError) as refused:
        sel.set_params(**{name: value})
    assert str(refused.value) == expected
    assert sel.params == BOTS(4).params  # nothing applied


def test_a_bool_parameter_is_checked_by_its_type_on_every_backend() -> None:
    for build in (lambda: BOTS(4, thompson=1), lambda: BOTS(4, backend="torch", device="cpu", thompson=1)):
        with pytest.raises(InvalidTypeError, match=r"^thompson: must be a bool, got 1$"):
            build()


def test_the_estimators_check_their_parameters_with_the_catalogue() -> None:
    weak, strong = [0.1, 0.2], [0.5, 0.6]
    cases = [
        (lambda: Interpolation(weak, strong, 1.5), MOMENTUM.check, 1.5, None),
        (lambda: Interpolation(weak, strong, min_gap=1.0), MIN_GAP.check, 1.0, None),
        (lambda: MultiReference([[0.1, 0.5], [0.2, 0.6]], momentum=-1), MOMENTUM.check, -1, None),
        (lambda: EmbeddingRegression([[0.0, 1.0], [1.0, 0.0]], forgetting=2.0), LAM.check, 2.0, "forgetting"),
        (lambda: EmbeddingRegression([[0.0, 1.0], [1.0, 0.0]], prior_precision=0), PRIOR_PRECISION.check, 0, None),
    ]
    for build, check, value, argument in cases:
        with pytest.raises(InvalidArgumentError) as expected:
            check(value, argument)
        with pytest.raises(InvalidArgumentError) as refused:
            build()
        assert str(refused.value) == str(expected.value)
    assert inspect.signature(Interpolation).parameters["momentum"].default == MOMENTUM.default
    assert inspect.signature(EmbeddingRegression).parameters["forgetting"].default == LAM.default
