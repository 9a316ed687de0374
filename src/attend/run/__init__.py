"""The run harness: what turns a config into a training, evaluation or prediction run. train.train(cfg) builds,
fits, tests and returns the monitored value; evaluate.evaluate(cfg) and predict.predict(cfg) test and decode a
checkpoint; context.run_context(cfg) owns what surrounds a training run (ckpt_path=last, config_resolved.yaml, the
DDP relaunch, W&B, the sweep's job, failure logging) and context.reported_as_messages() turns a user's error into
one line; parallel_jobs gives a parallel sweep job its device slot. The harness sits on top: it imports the other
rooms (config, checkpoints, callbacks, loggers, the builder), never the other way round. Nothing is imported here.
"""
