"""Static checks that cluster.yaml, docker/Dockerfile, .dockerignore and the docs agree.

Nothing here starts Ray or Docker; each test reads files and fails with the line to fix.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CLUSTER_YAML = ROOT / "cluster.yaml"
DOCKERFILE = ROOT / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PYPROJECT = ROOT / "pyproject.toml"
README = ROOT / "README.md"
CLUSTER_DOC = ROOT / "docs" / "cluster.md"

LOOPBACK_FLAG = "--dashboard-host=127.0.0.1"
PUBLIC_BINDS = ("0.0.0.0", "--dashboard-host=::", "--dashboard-host ::")
# An image reference whose repository ends in "sweeper", with an explicit tag.
IMAGE_RE = re.compile(r"(?<![\w./:-])((?:[a-z0-9.-]+(?::\d+)?/)*sweeper):([A-Za-z0-9_][A-Za-z0-9_.-]*)")
OFFICIAL_CUDA_RUNTIME_RE = re.compile(
    r"^pytorch/pytorch:(?P<torch>\d+\.\d+\.\d+)-cuda(?P<cuda>\d+\.\d+)-cudnn\d+-runtime$"
)


@pytest.fixture(scope="module")
def cluster() -> dict:
    return yaml.safe_load(CLUSTER_YAML.read_text())


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE.read_text())


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    instructions, pending = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical = (pending + line).strip()
        pending = ""
        if logical:
            keyword, _, args = logical.partition(" ")
            instructions.append((keyword.upper(), args.strip()))
    return instructions


def shell_lines(text: str) -> list[str]:
    """Lines of a document, with backslash-continued shell lines joined into one."""
    lines, pending = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    return lines


def start_commands(cluster: dict) -> list[str]:
    commands = []
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        commands += cluster.get(key) or []
    return commands


def all_commands(cluster: dict) -> list[str]:
    keys = [k for k in cluster if k.endswith("_commands")]
    return [cmd for key in keys for cmd in cluster.get(key) or []]


def ray_pins(text: str) -> set[str]:
    """Every Ray version pinned in text: ray==X, ray[extras]==X or ray.__version__ == 'X'."""
    pins = re.findall(r"\bray(?:\[[^\]]*\])?==([0-9][0-9A-Za-z.]*)", text)
    pins += re.findall(r"ray\.__version__\s*==\s*['\"]([^'\"]+)['\"]", text)
    return set(pins)


def admits(spec: str, version: str) -> bool:
    """Whether a PEP 440 specifier set such as '>=2.44,<2.61' admits version."""
    try:
        from packaging.specifiers import SpecifierSet
    except ImportError:
        return _admits_simple(spec, version)
    return SpecifierSet(spec).contains(version, prereleases=True)


def _admits_simple(spec: str, version: str) -> bool:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", v.split("+")[0]))

    checks = {
        ">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "==": lambda a, b: a == b,
        "!=": lambda a, b: a != b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
    }
    for clause in filter(None, (c.strip() for c in spec.split(","))):
        op = next(o for o in (">=", "<=", "==", "!=", ">", "<") if clause.startswith(o))
        if not checks[op](key(version), key(clause[len(op):].strip())):
            return False
    return True


def pyproject_dependency(name: str) -> str:
    """The version specifier of a dependency in pyproject.toml, e.g. '>=2.44,<2.61'."""
    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    for dep in deps:
        match = re.match(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$", dep)
        if match and match.group(1).lower() == name:
            return match.group(3).split(";")[0].strip()
    raise AssertionError(f"pyproject.toml has no dependency on {name}")


def dockerfile_pip_installs(instructions: list[tuple[str, str]]) -> list[list[str]]:
    """Arguments of every `pip install` inside the Dockerfile's RUN instructions."""
    separators = {"&&", "||", ";", "|", "{", "}", "(", ")"}
    installs = []
    for keyword, args in instructions:
        if keyword != "RUN":
            continue
        lexer = shlex.shlex(args, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        for i in range(len(tokens) - 1):
            if tokens[i].endswith("pip") and tokens[i + 1] == "install":
                rest = tokens[i + 2:]
                end = next((j for j, t in enumerate(rest) if t in separators), len(rest))
                installs.append(rest[:end])
    return installs


def base_image_default(instructions: list[tuple[str, str]]) -> str:
    for keyword, args in instructions:
        if keyword == "ARG" and args.startswith("BASE_IMAGE="):
            return args.split("=", 1)[1].strip().strip("'\"")
    raise AssertionError("docker/Dockerfile declares no ARG BASE_IMAGE=<default>")


def dockerignored(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parents wins."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").strip("/")
        if pattern.startswith("**/"):
            hit = any(fnmatch.fnmatch(c.split("/")[-1], pattern[3:]) for c in candidates)
        else:
            hit = any(fnmatch.fnmatch(c, pattern) and c.count("/") == pattern.count("/")
                      for c in candidates)
        if hit:
            excluded = not negated
    return excluded


def image_refs(text: str) -> set[tuple[str, str]]:
    return set(IMAGE_RE.findall(text))


# --- cluster.yaml ----------------------------------------------------------------------


def test_cluster_yaml_passes_rays_own_schema(cluster):
    util = pytest.importorskip("ray.autoscaler._private.util")
    pytest.importorskip("jsonschema")
    util.validate_config(util.prepare_config(cluster))


def test_every_referenced_node_type_exists(cluster):
    node_types = cluster["available_node_types"]
    references = {k: v for k, v in cluster.items() if k.endswith("_node_type")}
    assert "head_node_type" in references, "cluster.yaml names no head_node_type"
    for key, name in references.items():
        assert name in node_types, f"{key}: {name!r} is not in available_node_types"
    workers = [name for name in node_types if name != cluster["head_node_type"]]
    assert workers, "cluster.yaml declares no worker node type"


def test_every_node_type_declares_its_resources(cluster):
    for name, node_type in cluster["available_node_types"].items():
        resources = node_type.get("resources")
        assert isinstance(resources, dict), f"node type {name!r} declares no resources"
        assert {"CPU", "GPU"} <= set(resources), f"node type {name!r}: declare both CPU and GPU"
        assert node_type.get("node_config", {}).get("InstanceType"), f"{name!r}: no InstanceType"


def test_head_has_no_gpu_and_workers_do(cluster):
    node_types = cluster["available_node_types"]
    head = node_types[cluster["head_node_type"]]
    assert head["resources"]["GPU"] == 0, "the head must declare GPU: 0 so no trial lands on it"
    workers = {n: t for n, t in node_types.items() if n != cluster["head_node_type"]}
    assert any(t["resources"]["GPU"] >= 1 for t in workers.values()), "no worker type has a GPU"


def test_worker_limits_are_consistent(cluster):
    total = cluster["max_workers"]
    for name, node_type in cluster["available_node_types"].items():
        if name == cluster["head_node_type"]:
            continue
        low, high = node_type.get("min_workers", 0), node_type.get("max_workers")
        assert high is not None, f"worker type {name!r} has no max_workers"
        assert 0 <= low <= high <= total, f"{name!r}: need 0 <= min_workers <= max_workers <= {total}"
    assert cluster["idle_timeout_minutes"] > 0


def test_dashboard_is_bound_to_loopback_on_every_ray_start(cluster):
    starts = [cmd for cmd in start_commands(cluster) if "ray start" in cmd]
    assert any("--head" in cmd for cmd in starts), "head_start_ray_commands never starts a head"
    for cmd in starts:
        assert LOOPBACK_FLAG in cmd, f"ray start without {LOOPBACK_FLAG}: {cmd}"
    for cmd in all_commands(cluster):
        assert not any(bind in cmd for bind in PUBLIC_BINDS), f"binds a public interface: {cmd}"


def test_docs_never_start_a_public_dashboard():
    for line in shell_lines(CLUSTER_DOC.read_text()):
        if "ray start" not in line:
            continue
        assert not any(bind in line for bind in PUBLIC_BINDS), f"docs/cluster.md: {line.strip()}"
        if "--head" in line:
            assert LOOPBACK_FLAG in line, f"docs/cluster.md head without {LOOPBACK_FLAG}: {line}"


def test_file_mounts_carry_the_experiments(cluster):
    mounts = {
        target: str(source).strip().removeprefix("./").rstrip("/")
        for target, source in (cluster.get("file_mounts") or {}).items()
    }
    targets = [t for t, s in mounts.items() if s == "experiments"]
    assert targets, f"file_mounts does not copy ./experiments: {mounts}"
    assert all(t.rstrip("/").endswith("experiments") for t in targets)


# --- image name ------------------------------------------------------------------------


def test_docker_image_matches_the_dockerfile_and_docs(cluster):
    images = {cluster["docker"]["image"]}
    images |= {cluster["docker"][k] for k in ("head_image", "worker_image") if k in cluster["docker"]}
    assert len(images) == 1, f"cluster.yaml names more than one image: {images}"
    image = images.pop()
    repository, _, tag = image.rpartition(":")
    assert repository.rsplit("/", 1)[-1] == "sweeper" and tag, f"unexpected image {image!r}"

    build_tags = re.findall(r"-t\s+(\S+)", DOCKERFILE.read_text())
    assert image in build_tags, f"docker/Dockerfile documents {build_tags}, cluster.yaml uses {image}"
    assert CLUSTER_DOC.exists() and image in CLUSTER_DOC.read_text(), f"docs/cluster.md lacks {image}"

    for doc in (DOCKERFILE, README, *sorted((ROOT / "docs").glob("*.md"))):
        if not doc.exists():
            continue
        for repo, ref_tag in image_refs(doc.read_text()):
            assert repo == repository, (
                f"{doc.relative_to(ROOT)} names image {repo}:{ref_tag}, cluster.yaml uses {image}"
            )


# --- Ray and torch versions ------------------------------------------------------------


def test_ray_pin_agrees_everywhere(cluster):
    cluster_pins = ray_pins(CLUSTER_YAML.read_text())
    docker_pins = ray_pins(DOCKERFILE.read_text())
    assert len(cluster_pins) == 1, f"cluster.yaml must pin exactly one Ray version: {cluster_pins}"
    assert cluster_pins == docker_pins, f"cluster.yaml pins {cluster_pins}, Dockerfile {docker_pins}"
    (version,) = cluster_pins
    spec = pyproject_dependency("ray")
    assert admits(spec, version), f"pyproject's ray{spec} does not admit the pinned {version}"
    if CLUSTER_DOC.exists():
        doc_pins = ray_pins(CLUSTER_DOC.read_text())
        assert doc_pins <= cluster_pins, f"docs/cluster.md pins Ray {doc_pins}, not {version}"


def test_base_image_is_an_official_pytorch_cuda_runtime(dockerfile):
    base = base_image_default(dockerfile)
    match = OFFICIAL_CUDA_RUNTIME_RE.match(base)
    assert match, f"base image {base!r} is not pytorch/pytorch:<torch>-cuda<x.y>-cudnn<n>-runtime"
    assert admits(pyproject_dependency("torch"), match["torch"]), (
        f"pyproject's torch range does not admit the base image's torch {match['torch']}"
    )
    froms = [args for keyword, args in dockerfile if keyword == "FROM"]
    assert froms and froms[0].split()[0] == "${BASE_IMAGE}", "FROM must use ${BASE_IMAGE}"


def test_dockerfile_installs_dependencies_with_the_ray_pin_before_copying_the_code(dockerfile):
    """A code change must not reinstall Ray and transformers: the dependency layer comes first."""
    (version,) = ray_pins(CLUSTER_YAML.read_text())
    steps = [(k, a, dockerfile_pip_installs([(k, a)])) for k, a in dockerfile]
    code_copy = next(i for i, (k, a, _) in enumerate(steps) if k == "COPY" and a.split()[0] == "sweeper")
    deps = [(i, args) for i, (_, _, installs) in enumerate(steps) for args in installs
            if any(re.match(r"ray(\[|==)", a) for a in args)]
    assert deps, "no `pip install ray[...]==...` in docker/Dockerfile"
    at, args = deps[0]
    assert at < code_copy, "the Ray install runs after COPY sweeper: every code change would redo it"
    assert "-r" in args, f"the dependency install does not take pyproject's dependencies: {args}"
    extras = re.match(r"ray(?:\[([^\]]*)\])?==(.+)$", next(a for a in args if re.match(r"ray(\[|==)", a)))
    assert extras and extras.group(2) == version, f"{args} does not pin ray=={version}"
    assert "tune" in (extras.group(1) or "").split(","), f"{args} lacks the tune extra"
    project = [(i, a) for i, (_, _, installs) in enumerate(steps) for a in installs if "." in a]
    assert project and project[0][0] > code_copy and "--no-deps" in project[0][1], project


def test_cpu_variant_pins_the_base_images_torch(dockerfile):
    args = dict(a.split("=", 1) for k, a in dockerfile if k == "ARG" and "=" in a)
    base_torch = OFFICIAL_CUDA_RUNTIME_RE.match(base_image_default(dockerfile))["torch"]
    assert args["TORCH_CPU_VERSION"] == base_torch
    cpu = [a for installs in dockerfile_pip_installs(dockerfile) for a in installs if a.startswith("torch")]
    assert cpu == ["torch==${TORCH_CPU_VERSION}", "torchvision==${TORCHVISION_CPU_VERSION}"], cpu


def test_image_runs_as_a_non_root_user(dockerfile):
    users = [args.split(":")[0] for keyword, args in dockerfile if keyword == "USER"]
    assert users and users[-1] not in ("root", "0"), f"the image's last USER is {users or 'unset'}"


# --- build context ---------------------------------------------------------------------


def test_dockerignore_keeps_the_context_small_but_complete(dockerfile):
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    for path in (".venv/bin/python", "results/run/rows.parquet", ".git/HEAD"):
        assert dockerignored(patterns, path), f".dockerignore lets {path} into the build context"
    copied = [args.split()[:-1] for keyword, args in dockerfile if keyword == "COPY"]
    for source in (s for sources in copied for s in sources if not s.startswith("--")):
        probe = f"{source.rstrip('/')}/__init__.py" if source == "sweeper" else source
        assert not dockerignored(patterns, probe), f".dockerignore drops {source}, which COPY needs"


# --- the checks themselves -------------------------------------------------------------


def test_dockerignore_matcher():
    patterns = ["*", "!pyproject.toml", "!sweeper", "**/__pycache__"]
    assert dockerignored(patterns, ".venv/lib/x.py")
    assert not dockerignored(patterns, "pyproject.toml")
    assert not dockerignored(patterns, "sweeper/zoo/vision.py")
    assert dockerignored(patterns, "sweeper/__pycache__/cli.pyc")
    assert not dockerignored([".git", "results"], "sweeper/results.py")


def test_version_range_fallback_parser():
    assert _admits_simple(">=2.44,<2.61", "2.60.0")
    assert not _admits_simple(">=2.44,<2.61", "2.61.0")
    assert not _admits_simple(">=2.6,<2.16", "2.5.1")
    assert _admits_simple(">=2.6,<2.16", "2.14.1")
