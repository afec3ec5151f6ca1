"""Everything around the engine: the running server, the Spark job, the ``scemon``
command and the benchmarks, one sub-package per job.

==================  ==========================================================  ==============================
package             what it is                                                  may import
==================  ==========================================================  ==============================
``service.server``  the FastAPI app: routes, EngineHost, store, hub, auth, ...  ecq, api
``service.pipeline`` the Spark job: sources, parsing, dead letters, delivery    ecq, api, service.files
``service.files``   the files users hand scemon: queries, events, matches       ecq
``service.bench``   every benchmark: the paper's figures, replay, the server    ecq, api, service.server,
                                                                                service.files
``service.cli``     the ``scemon`` Typer app, one module per command            all of the above
==================  ==========================================================  ==============================

Arrows point one way: cli → server / pipeline / bench → api, files → ecq; ``ecq`` and
``api`` never import ``service`` (``tests/test_dependencies.py`` holds all of this).
"""
