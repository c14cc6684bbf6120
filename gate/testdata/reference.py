#!/usr/bin/env python3
"""Independent reference for the 4D-CQ gate on the ai_investment case.

It scores evidence with plain Python (no CEL, no Go) and follows the routing
loop of DESIGN.md §5 literally, re-scoring on every round, and prints the
expected decisions as YAML. gate_test.go checks the Go gate against them.

Regenerate (from the repository root):

    python3 gate/testdata/reference.py > gate/testdata/ai_investment_cases.yaml

Standard library only.
"""

import json
import random

W = (0.25, 0.25, 0.25, 0.25)  # R, C, O, Ro
TAU_PASS, TAU_REPAIR, K_DRY = 0.85, 0.50, 3

GOV_COVERAGE = [
    "filing_license_verified",
    "data_compliance_verified",
    "safety_certified",
    "controllability_data_present",
    "privacy_compliance_verified",
    "cross_border_compliance_verified",
]
GOV_FLAGS = GOV_COVERAGE + ["compliance_before_operations", "evidence_source_verified"]

LAND_COVERAGE = [
    "production_deployed",
    "paying_contracts_verified",
    "industry_embedded",
    "economic_value_quantified",
    "repeat_orders",
]
LAND_FLAGS = LAND_COVERAGE + ["delivery_before_repeat_claim", "contract_evidence_verified_third_party"]


def share(e, names):
    return sum(1 for n in names if e[n]) / len(names)


def governance(e):
    r = 1.0 if e["filing_license_verified"] and e["data_compliance_verified"] else 0.2
    c = share(e, GOV_COVERAGE)
    o = 1.0 if e["compliance_before_operations"] else 0.4
    ro = 1.0 if e["evidence_source_verified"] else 0.3
    return (r, c, o, ro), e["governance_gap_externally_verifiable"]


def governance_repair(e):
    return {"filing_license_verified": True, "data_compliance_verified": True, "evidence_source_verified": True}


def landing(e):
    r = 1.0 if e["production_deployed"] and e["paying_contracts_verified"] else 0.2
    c = share(e, LAND_COVERAGE)
    o = 1.0 if e["delivery_before_repeat_claim"] else 0.4
    ro = 1.0 if e["contract_evidence_verified_third_party"] else 0.3
    return (r, c, o, ro), e["landing_gap_externally_verifiable"]


def landing_repair(e):
    return {"paying_contracts_verified": True, "contract_evidence_verified_third_party": True}


FUNCTIONS = {
    # name: (flags that default to false, {field: default}, score, repair)
    "score_invest_governance": (GOV_FLAGS, {"governance_gap_externally_verifiable": True}, governance, governance_repair),
    "score_landing_level": (LAND_FLAGS, {"landing_gap_externally_verifiable": True}, landing, landing_repair),
}


def decide(fn, evidence):
    flags, defaults, score, repair = FUNCTIONS[fn]
    e = dict(evidence)
    for f in flags:
        e.setdefault(f, False)
    for f, v in defaults.items():
        e.setdefault(f, v)

    repair_attempts = 0
    dry_rounds = 0
    while True:
        dims, verifiable = score(e)
        q = W[0] * dims[0] + W[1] * dims[1] + W[2] * dims[2] + W[3] * dims[3]
        if dry_rounds >= K_DRY:
            route = "ESCALATE"
        elif q >= TAU_PASS:
            route = "PASS"
        elif TAU_REPAIR <= q < TAU_PASS and verifiable:
            route = "AUTO_REPAIR"
        else:
            route = "ESCALATE"
        if route != "AUTO_REPAIR":
            break
        if repair is None:
            route = "ESCALATE"
            break
        repair_attempts += 1
        new = dict(e)
        new.update(repair(e))
        if new == e:
            dry_rounds += 1
        else:
            e = new
            dry_rounds = 0
        if dry_rounds >= K_DRY:
            route = "ESCALATE"
            break

    if route == "PASS":
        reason = "PASS_ABOVE_THRESHOLD"
    elif q >= TAU_REPAIR and not verifiable:
        reason = "GAP_NOT_EXTERNALLY_VERIFIABLE"
    elif repair_attempts > 0 and dry_rounds >= K_DRY:
        reason = "AUTO_REPAIR_DRY_ROUNDS_EXHAUSTED"
    elif q >= TAU_REPAIR and repair is None:
        reason = "AUTO_REPAIR_UNAVAILABLE_NO_REPAIR_FN"
    else:
        reason = "QUALITY_BELOW_REPAIR_THRESHOLD"
    # No floors, no soft commits and O is never 0 in this case, so the
    # later rules (DIMENSION_BELOW_FLOOR, SOFT_COMMIT_*, ORDERING_*) never apply.
    return {"gate_state": route, "reason_code": reason, "q": q, "dims": dims, "repair_attempts": repair_attempts}


def on(*names, **extra):
    e = {n: True for n in names}
    e.update(extra)
    return e


G, L = "score_invest_governance", "score_landing_level"

CASES = [
    # governance
    ("gov_all_true", G, on(*GOV_FLAGS)),
    ("gov_empty", G, {}),
    ("gov_all_false_explicit", G, {f: False for f in GOV_FLAGS}),
    ("gov_order_and_source_only_repair_then_dry", G, on("compliance_before_operations", "evidence_source_verified")),
    ("gov_tie_0_5_repairs_to_pass", G, on("safety_certified", "controllability_data_present", "privacy_compliance_verified", "compliance_before_operations")),
    ("gov_tie_0_5_not_verifiable", G, on("safety_certified", "controllability_data_present", "privacy_compliance_verified", "compliance_before_operations", governance_gap_externally_verifiable=False)),
    ("gov_tie_0_85_pass", G, on(*GOV_COVERAGE, "evidence_source_verified")),
    ("gov_tie_0_85_pass_not_verifiable", G, on(*GOV_COVERAGE, "evidence_source_verified", governance_gap_externally_verifiable=False)),
    ("gov_just_below_pass_dry", G, on(*GOV_COVERAGE[:5], "evidence_source_verified")),
    ("gov_below_repair", G, on("safety_certified", "privacy_compliance_verified", "compliance_before_operations")),
    ("gov_filing_and_data_only", G, on("filing_license_verified", "data_compliance_verified")),
    ("gov_repair_to_pass_from_order", G, on("safety_certified", "controllability_data_present", "privacy_compliance_verified", "cross_border_compliance_verified", "compliance_before_operations")),
    ("gov_band_not_verifiable", G, on("filing_license_verified", "data_compliance_verified", "compliance_before_operations", governance_gap_externally_verifiable=False)),
    ("gov_below_not_verifiable", G, on("safety_certified", governance_gap_externally_verifiable=False)),
    ("gov_verifiable_explicit_true", G, on("filing_license_verified", "data_compliance_verified", "compliance_before_operations", governance_gap_externally_verifiable=True)),
    ("gov_with_note", G, on(*GOV_FLAGS, analyst_note="checked with the regulator")),
    # landing
    ("land_all_true", L, on(*LAND_FLAGS)),
    ("land_empty", L, {}),
    ("land_tie_0_85_core", L, on("production_deployed", "paying_contracts_verified", "delivery_before_repeat_claim", "contract_evidence_verified_third_party")),
    ("land_tie_0_85_no_order", L, on(*LAND_COVERAGE, "contract_evidence_verified_third_party")),
    ("land_tie_0_5_repair_dry", L, on("industry_embedded", "repeat_orders", "contract_evidence_verified_third_party")),
    ("land_tie_0_5_not_verifiable", L, on("industry_embedded", "repeat_orders", "contract_evidence_verified_third_party", landing_gap_externally_verifiable=False)),
    ("land_production_repairs_to_pass", L, on("production_deployed", "industry_embedded", "delivery_before_repeat_claim")),
    ("land_no_production_dry", L, on("industry_embedded", "economic_value_quantified", "repeat_orders", "delivery_before_repeat_claim")),
    ("land_below_repair", L, on("repeat_orders")),
    ("land_band_not_verifiable", L, on("production_deployed", "paying_contracts_verified", "industry_embedded", landing_gap_externally_verifiable=False)),
    ("land_above_pass_not_verifiable", L, on(*LAND_FLAGS, landing_gap_externally_verifiable=False)),
    ("land_paying_third_party_only", L, on("paying_contracts_verified", "contract_evidence_verified_third_party")),
]


def random_cases(rng, fn, flags, gap, n):
    out = []
    for i in range(n):
        e = {f: rng.random() < 0.5 for f in flags if rng.random() < 0.8}
        if rng.random() < 0.3:
            e[gap] = rng.random() < 0.5
        out.append((f"{fn}_random_{i:02d}", fn, e))
    return out


def scalar(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    return json.dumps(v)  # a JSON string is a YAML double-quoted scalar


def main():
    rng = random.Random(4)  # fixed seed: the file is reproducible
    cases = list(CASES)
    cases += random_cases(rng, G, GOV_FLAGS, "governance_gap_externally_verifiable", 10)
    cases += random_cases(rng, L, LAND_FLAGS, "landing_gap_externally_verifiable", 10)
    names = [c[0] for c in cases]
    assert len(set(names)) == len(names), "duplicate case names"

    print("# Generated by gate/testdata/reference.py; do not edit by hand.")
    print("# python3 gate/testdata/reference.py > gate/testdata/ai_investment_cases.yaml")
    print("# Expected decisions of the independent Python reference for the")
    print("# ai_investment case (testdata/ai_investment.yaml).")
    for name, fn, e in cases:
        d = decide(fn, e)
        ev = ", ".join(f"{k}: {scalar(v)}" for k, v in e.items())
        print(f"- name: {name}")
        print(f"  precondition_fn: {fn}")
        print(f"  evidence: {{{ev}}}")
        print(f"  gate_state: {d['gate_state']}")
        print(f"  reason_code: {d['reason_code']}")
        print(f"  q: {scalar(d['q'])}")
        r, c, o, ro = d["dims"]
        print(f"  scores: {{R: {scalar(r)}, C: {scalar(c)}, O: {scalar(o)}, Ro: {scalar(ro)}}}")
        print(f"  repair_attempts: {d['repair_attempts']}")


if __name__ == "__main__":
    main()
