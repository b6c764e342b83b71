/** The commands `llorch` knows, in the order the overview lists them. */
export const COMMANDS = [
  'up',
  'submit',
  'status',
  'nodes',
  'models',
  'load',
  'unload',
  'tasks',
  'task',
  'cancel',
  'drain',
  'reload',
] as const;
export type CommandName = (typeof COMMANDS)[number];

const TARGET = `  --url URL        orchestratord (env LLORCH_URL; default http://127.0.0.1:8080)
  --token TOKEN    API token (env LLORCH_API_TOKEN)`;
const JSON_FLAG = '  --json           one JSON document on stdout instead of tables';
const HELP_FLAG = '  -h, --help       this help';

/** Per-command help (`llorch <command> --help`), also printed under a usage error of that command. */
export const COMMAND_USAGE: Readonly<Record<CommandName, string>> = {
  up: `usage: llorch up [--config FILE] [--addr HOST:PORT] [--token TOKEN] [--replicas N]

Starts orchestratord and one pool-managerd as child processes and waits until every pool is
ready. Ctrl-C (or SIGTERM) stops both and their engines; they also die with llorch when it is
killed (parent-death signal through setpriv where available).

When the config loads models on request (on_demand, as requirements/cpu-dev.yaml does),
orchestratord registers requirements/catalog.yaml's models at start: embedder, reranker and coder,
each loaded on its first request (env ORCHD_CATALOG_FILE names another file; empty: none).

With --replicas N (N > 1): redis-server on a free loopback port (the shared cluster state,
append-only file fsynced every second), N orchestratord replicas on free loopback ports, and
HAProxy on --addr in front of them (health checks on /readyz), then pool-managerd, which like
every client reaches the replicas through HAProxy. Needs Debian's redis-server and haproxy
(sudo apt-get install redis-server haproxy). Ctrl-C stops them in reverse order.

  --config FILE    pool-managerd config (default requirements/cpu-dev.yaml)
  --addr H:P       orchestratord listen address, or the balancer's (default 127.0.0.1:8080)
  --token TOKEN    API token the daemons use (env LLORCH_API_TOKEN)
  --replicas N     orchestratord replicas behind a load balancer (1..16; default 1: one process)
  --state-dir DIR  with --replicas: Redis data and haproxy.cfg (default .cache/llorch-up)
${HELP_FLAG}`,
  submit: `usage: llorch submit "<message>" [options]

Sends a chat message (rendered with the model's chat template) and prints the answer as it
streams; the summary goes to stderr. Ctrl-C cancels the task and exits 130.

  --raw            send the text as a plain completion prompt instead of a chat message
  --system TEXT    system message before the user message (chat only)
  --model REF      model: alias, catalog id or ref (default synthetic, the out-of-the-box pool's alias)
  --max-tokens N   most tokens to generate (default 64)
  --seed N         sampling seed
  --temperature T  sampling temperature (0..2)
  --top-p P        nucleus sampling (0..1)
  --stop S         stop string; repeat for several
  --json-schema F  the answer must match the JSON Schema in file F
  --batch          batch priority (default interactive)
${JSON_FLAG.replace('instead of tables', 'with the final answer instead of streaming')}
${TARGET}
${HELP_FLAG}`,
  status: `usage: llorch status [--json]

Nodes, pools and the admission queue.

${JSON_FLAG}
${TARGET}
${HELP_FLAG}`,
  nodes: `usage: llorch nodes [--json]

Registered nodes.

${JSON_FLAG}
${TARGET}
${HELP_FLAG}`,
  models: `usage: llorch models [--json]

Every model the cluster knows, once (GET /v2/catalog/models): registered in the catalog, served by
a pool, or both — its aliases, status (registered, loading, ready, unloading, failed), the pools it
is loaded on, since when its copies are idle, whether it is pinned, and why its last load failed.

${JSON_FLAG}
${TARGET}
${HELP_FLAG}`,
  load: `usage: llorch load <model> [--node NODE]

Loads a copy of a catalog model (by ref or alias) on the node with the most free on-demand memory,
or on NODE; a load already under way is not asked twice. Refused when the model has max_loaded
copies, or when no node has room.

  --node NODE      load on this node
${TARGET}
${HELP_FLAG}`,
  unload: `usage: llorch unload <model> [--node NODE] [--deadline-ms MS]

Unloads the copies of a model loaded on demand (idle ones first), never below its pin; pools of a
node's config are not unloaded.

  --node NODE      only the copies on this node
  --deadline-ms MS in-flight work's deadline before the engine stops (default 30000)
${TARGET}
${HELP_FLAG}`,
  tasks: `usage: llorch tasks [--state S] [--model M] [--priority P] [--since T] [--limit N] [--json]

Tasks newest first (GET /v2/tasks): queued, running, and ended ones for as long as orchestratord
keeps their records (ORCHD_TASK_RETENTION_MS). A client key sees its own tasks; an operator's, all.
Pages are followed until N tasks are listed.

  --state S        queued, running or ended
  --model M        only this model's tasks (the name the client used, or its ref)
  --priority P     interactive or batch
  --since T        admitted at or after T: an age (30s, 10m, 2h, 1d), ms since the epoch, or an
                   ISO-8601 time with offset (2026-01-01T09:00:00Z)
  --limit N        most tasks to list (1..10000; default 50)
${JSON_FLAG.replace('instead of tables', '({tasks, next_cursor?}) instead of the table')}
${TARGET}
${HELP_FLAG}`,
  task: `usage: llorch task <task-id> [--json]

One task's record (GET /v2/tasks/{id}): state, model, priority, its queue place while queued, the
pool and node it runs or ran on, outcome, usage and timings. Unknown, expired (past
ORCHD_TASK_RETENTION_MS) and other keys' tasks are all NOT_FOUND.

${JSON_FLAG.replace('one JSON document on stdout instead of tables', 'the TaskInfo document as orchestratord sent it')}
${TARGET}
${HELP_FLAG}`,
  cancel: `usage: llorch cancel <task-id>

Cancels a queued or running task (POST /v2/tasks/{id}/cancel).

${TARGET}
${HELP_FLAG}`,
  drain: `usage: llorch drain <pool-id> [--deadline-ms MS]

Drains a pool: no new work; in-flight work may run until the deadline, then the engine stops.

  --deadline-ms MS in-flight work's deadline (default 30000)
${TARGET}
${HELP_FLAG}`,
  reload: `usage: llorch reload <pool-id> <model-ref> [--sha256 HEX] [--deadline-ms MS]

Reloads a pool with another model; on failure the old engine is restored.

  --sha256 HEX     expected SHA-256 of the new model
  --deadline-ms MS in-flight work's deadline before the switch (default 30000)
${TARGET}
${HELP_FLAG}`,
};

/** `llorch --help`: every command in one screen. */
export const USAGE = `llorch — llama-orch command line

usage: llorch <command> [options]      llorch <command> --help for its options

  up [--replicas N]          start orchestratord (or N replicas behind HAProxy) + one pool-managerd
  submit "<message>"         send a chat message (or --raw prompt) and stream the answer
  status                     nodes, pools and the admission queue
  nodes                      registered nodes
  models                     models the cluster serves or knows
  load <model>               load a copy of a catalog model
  unload <model>             unload a model's on-demand copies
  tasks                      recent and running tasks (filters: --state, --model, --since …)
  task <task-id>             one task's record: state, placement, outcome, usage, timings
  cancel <task-id>           cancel a task
  drain <pool-id>            drain a pool
  reload <pool-id> <model>   reload a pool with another model

  --json on status, nodes, models, tasks, task and submit prints one JSON document.
  -V, --version  print the version       -h, --help  this help

Global: --url (env LLORCH_URL, default http://127.0.0.1:8080), --token (env LLORCH_API_TOKEN)
Colour only on a terminal, never with NO_COLOR set. Exit codes: 0 ok, 1 error, 2 usage, 130 interrupted.`;
