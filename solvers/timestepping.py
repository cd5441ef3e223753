"""Time stepping: the one integrator (`solvers.integrators`: `RungeKutta`, `FixedStep`, `march`,
`integrate`, `IntegrationResult`, `Failure`) and the named steppers that drive it (`solvers.steppers`:
`STEPPERS`, `Stepper`, `keyed_normal`). This module offers both under one name.
"""
from .integrators import (BS32, DOPRI5, ROW_BLOCK, TABLEAUX, EventDriven, Failure, FixedStep, IntegrationResult,
                          Integrator, RungeKutta, Tableau, integrate, integrate_fixed, march, rms_norm)
from .steppers import STEPPERS, AdaptiveRK, EulerMaruyama, EulerNormalize, Events, SSPRK3, Stepper, keyed_normal

__all__ = ["Tableau", "DOPRI5", "BS32", "TABLEAUX", "ROW_BLOCK", "Failure", "IntegrationResult", "rms_norm", "Integrator",
           "RungeKutta", "FixedStep", "march", "integrate", "integrate_fixed", "EventDriven", "Stepper", "AdaptiveRK",
           "SSPRK3", "EulerMaruyama", "EulerNormalize", "Events", "STEPPERS", "keyed_normal"]
