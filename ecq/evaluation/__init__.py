"""What the shared network is measured against and on: the separate-processing baseline
(:mod:`.baseline`, each query's private :mod:`.plan`) and the seeded synthetic workloads
of the SCEMon paper's evaluation (:mod:`.workload`)."""
