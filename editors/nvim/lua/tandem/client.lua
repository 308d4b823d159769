-- The tandem language client: starts `tandem lsp` once per Neovim, holds
-- requests until `initialize` has been answered (a request sent earlier
-- is refused with "Server not initialized"), and attaches every file
-- buffer of the workspace as it is opened, so the agent reads what the
-- user sees, unsaved edits included.
local config = require('tandem.config')

local M = {}

local state = {
  id = nil, --- @type integer?
  ready = false,
  root = nil, --- @type string?
  queue = {}, --- @type fun(client: vim.lsp.Client)[]
  handlers = {}, --- @type table<string, function>
}

--- Called (scheduled) when the daemon exits: state tied to it is stale.
--- @type fun(code: integer)[]
M.on_exit = {}

--- Registers the handlers of the daemon's notifications and requests;
--- they take effect when the client starts.
function M.set_handlers(handlers)
  state.handlers = handlers
end

local function root_dir()
  local root = config.current.root_dir
  if type(root) == 'function' then
    root = root()
  end
  return vim.fs.normalize(vim.fn.fnamemodify(root or vim.fn.getcwd(), ':p')):gsub('/$', '')
end

--- Whether `buf` is a file of the workspace the client serves.
local function serves(buf)
  if not state.root or not vim.api.nvim_buf_is_loaded(buf) or vim.bo[buf].buftype ~= '' then
    return false
  end
  local name = vim.api.nvim_buf_get_name(buf)
  if name == '' then
    return false
  end
  local path = vim.fs.normalize(vim.fn.fnamemodify(name, ':p'))
  return path == state.root or vim.startswith(path, state.root .. '/')
end

--- Attaches `buf` to the running client if it is a workspace file.
function M.attach(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  if state.id and vim.lsp.get_client_by_id(state.id) and serves(buf) then
    if not vim.lsp.buf_is_attached(buf, state.id) then
      vim.lsp.buf_attach_client(buf, state.id)
    end
  end
end

local function capabilities()
  return vim.tbl_deep_extend('force', vim.lsp.protocol.make_client_capabilities(), {
    general = { positionEncodings = { 'utf-8', 'utf-16', 'utf-32' } },
    workspace = {
      applyEdit = true,
      workspaceEdit = {
        documentChanges = true,
        resourceOperations = { 'create', 'rename', 'delete' },
        changeAnnotationSupport = { groupsOnLabel = false },
      },
    },
    window = { workDoneProgress = true },
    experimental = {
      tandem = {
        requestPermission = true,
        requestUserInput = true,
        languageFeatures = require('tandem.language').FEATURES,
      },
    },
  })
end

local function flush()
  local client = state.id and vim.lsp.get_client_by_id(state.id)
  if not client then
    return
  end
  local queue = state.queue
  state.queue = {}
  for _, send in ipairs(queue) do
    send(client)
  end
end

--- Starts the daemon (once) and returns the client id, or nil and why.
--- @return integer? id, string? err
function M.start()
  if state.id and vim.lsp.get_client_by_id(state.id) then
    return state.id
  end
  state.ready = false
  state.root = root_dir()
  local ok, id = pcall(vim.lsp.start, {
    name = 'tandem',
    cmd = config.current.cmd,
    root_dir = state.root,
    workspace_folders = { { uri = vim.uri_from_fname(state.root), name = state.root } },
    capabilities = capabilities(),
    handlers = state.handlers,
    init_options = config.current.init_options,
    -- The agent must see every keystroke before a prompt goes out.
    flags = { debounce_text_changes = 0 },
    on_init = function(client)
      state.ready = true
      M.warn_without_sandbox(client)
      -- Outside the initialize callback, so handlers may use the client.
      vim.schedule(function()
        for _, buf in ipairs(vim.api.nvim_list_bufs()) do
          M.attach(buf)
        end
        flush()
        vim.api.nvim_exec_autocmds('User', { pattern = 'TandemReady', modeline = false })
      end)
    end,
    on_exit = function(code, signal)
      local failed = state.queue
      state.id, state.ready, state.queue = nil, false, {}
      vim.schedule(function()
        for _, send in ipairs(failed) do
          send(nil)
        end
        for _, callback in ipairs(M.on_exit) do
          callback(code)
        end
        if code ~= 0 then
          vim.notify(
            string.format('tandem: the daemon exited (code %d, signal %d); see :checkhealth tandem', code, signal),
            vim.log.levels.ERROR
          )
        end
      end)
    end,
  }, { attach = false })
  if not ok or not id then
    return nil, 'could not start `' .. table.concat(config.current.cmd, ' ') .. '`: ' .. tostring(id)
  end
  state.id = id
  return id
end

--- Whether the daemon has answered `initialize`.
function M.ready()
  return state.ready and state.id ~= nil and vim.lsp.get_client_by_id(state.id) ~= nil
end

--- The running client, if any.
function M.get()
  return state.id and vim.lsp.get_client_by_id(state.id) or nil
end

--- The exec sandbox as the daemon's initialize answer reports it
--- (`capabilities.experimental.tandem.sandbox`), or nil.
function M.sandbox(client)
  return vim.tbl_get(client.server_capabilities or {}, 'experimental', 'tandem', 'sandbox')
end

--- Says once per start when the daemon has no exec sandbox: commands then
--- ask permission every time, even in auto mode.
function M.warn_without_sandbox(client)
  local sandbox = M.sandbox(client)
  if sandbox and sandbox.available == false then
    local reason = type(sandbox.reason) == 'string' and sandbox.reason or 'exec sandbox unavailable'
    vim.schedule(function()
      vim.notify('tandem: ' .. reason, vim.log.levels.WARN)
    end)
  end
end

--- Runs `send(client)` once the daemon is initialized (starting it if
--- needed); `send(nil)` if it cannot start or exits first.
local function when_ready(send)
  local _, err = M.start()
  if err then
    vim.notify('tandem: ' .. err, vim.log.levels.ERROR)
    send(nil)
    return
  end
  table.insert(state.queue, send)
  if M.ready() then
    flush()
  end
end

local not_running = { code = -32099, message = 'tandem is not running (see :checkhealth tandem)' }

--- Sends a request once the daemon is ready; `on_result(err, result)`.
function M.request(method, params, on_result)
  when_ready(function(client)
    if not client then
      return on_result and on_result(not_running, nil)
    end
    client:request(method, params, function(err, result)
      if on_result then
        on_result(err, result)
      end
    end)
  end)
end

function M.notify(method, params)
  when_ready(function(client)
    if client then
      client:notify(method, params)
    end
  end)
end

--- The position encoding the daemon negotiated.
function M.encoding()
  local client = M.get()
  return client and client.offset_encoding or 'utf-8'
end

--- Stops the daemon, waiting up to `timeout_ms` for it to exit.
function M.stop(timeout_ms)
  local client = M.get()
  if not client then
    return
  end
  client:stop()
  vim.wait(timeout_ms or 1000, function()
    return client:is_stopped()
  end, 10)
end

return M
