"""Hydra's sweep syntax as Optuna distributions: ``choice(a,b)`` and ``a,b`` are categorical,
``range(1,5)`` categorical over its values, ``interval(lo,hi)`` uniform (``tag(log, interval(..))``
log-uniform, ``tag(int, interval(..))`` integers). A plain value is a fixed override of every trial."""

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.errors import HydraException
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution


def search_space(
    parser: OverridesParser, params: dict[str, str], arguments: list[str]
) -> tuple[dict[str, BaseDistribution], list[str]]:
    """(distribution per key, fixed overrides) from the config's ``params`` and the command line (which wins)."""
    distributions: dict[str, BaseDistribution] = {}
    fixed: dict[str, str] = {}
    entries = [f"{key}={value}" for key, value in params.items()] + list(arguments)
    for override in parser.parse_overrides(entries):
        key = override.get_key_element()
        distributions.pop(key, None)
        fixed.pop(key, None)
        if override.is_sweep_override():
            distributions[key] = distribution(override)
        else:
            fixed[key] = f"{key}={override.get_value_element_as_str()}"
    return distributions, list(fixed.values())


def distribution(override: Override) -> BaseDistribution:
    """The Optuna distribution of one sweep override."""
    sweep = override.value()
    if isinstance(sweep, ChoiceSweep):
        return CategoricalDistribution([choice_value(v) for v in sweep.list])
    if isinstance(sweep, RangeSweep):
        return CategoricalDistribution(list(override.sweep_iterator()))
    if isinstance(sweep, IntervalSweep):
        if "int" in sweep.tags:
            return IntDistribution(int(sweep.start), int(sweep.end), log="log" in sweep.tags)
        return FloatDistribution(sweep.start, sweep.end, log="log" in sweep.tags)
    raise HydraException(
        f"the Optuna sweeper cannot search {override.input_line!r}: use choice(a,b), a,b, range(lo,hi), "
        f"interval(lo,hi) or tag(log, interval(lo,hi))"
    )


def choice_value(value):
    """Optuna's categorical values are None, bool, int, float or str; anything else as its override text."""
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)
