-- The options of `require('tandem').setup()`: one schema (type, default,
-- description per option) that validates what the user passes, fills the
-- defaults, and warns once about keys it does not know. doc/tandem.txt
-- documents the same options.
local M = {}

--- @class tandem.Option
--- @field type string|string[] accepted Lua types
--- @field default any
--- @field desc string

--- @type table<string, tandem.Option>
M.schema = {
  cmd = {
    type = 'table',
    default = { 'tandem', 'lsp' },
    desc = 'the command that starts the daemon (a list: program, arguments)',
  },
  init_options = {
    type = { 'table', 'nil' },
    default = nil,
    desc = '`initializationOptions`: a configuration layer with the keys of config.toml',
  },
  session_config = {
    type = { 'table', 'nil' },
    default = nil,
    desc = 'the `config` of `tandem/newSession` (per-session overrides)',
  },
  root_dir = {
    type = { 'string', 'function', 'nil' },
    default = nil,
    desc = 'the workspace root (or a function returning it); default: the current directory',
  },
  on_permission = {
    type = { 'function', 'nil' },
    default = nil,
    desc = 'function(params) -> optionId to decide permission requests in Lua; nil asks with vim.ui.select',
  },
  chat = {
    type = 'table',
    default = { split = 'botright vsplit', width = 80, flush_ms = 20 },
    desc = 'the chat window: `split` (the command that opens it), `width`, `flush_ms` (how often streamed text is drawn)',
  },
  tasks = {
    type = 'table',
    default = { 'explain', 'fix', 'edit', 'tests', 'document' },
    desc = 'the task ids `:TandemTask` completes (the daemon defines them; add your own from config.toml)',
  },
  keymaps = {
    type = { 'table', 'boolean' },
    default = {
      review_accept = '<leader>ta',
      review_reject = '<leader>tr',
      review_next = ']h',
      review_prev = '[h',
      task_edit = '<leader>ae',
      task_explain = '<leader>ax',
      task_fix = '<leader>af',
      chat_send = '<CR>',
    },
    desc = 'default keymaps; set one to false to turn it off, or `keymaps = false` for none',
  },
}

local function type_ok(value, accepted)
  local t = type(value)
  if type(accepted) == 'string' then
    return t == accepted
  end
  return vim.tbl_contains(accepted, t)
end

local function type_name(accepted)
  return type(accepted) == 'string' and accepted or table.concat(accepted, ' or ')
end

--- Defaults for every option.
function M.defaults()
  local out = {}
  for key, option in pairs(M.schema) do
    out[key] = vim.deepcopy(option.default)
  end
  return out
end

--- Checks `opts` against the schema and merges it over the defaults.
--- Returns the config, or nil and a list of problems (each naming the key).
--- Unknown keys are not fatal: they come back in `unknown`.
--- @return table? config, string[] problems, string[] unknown
function M.resolve(opts)
  opts = opts or {}
  local problems, unknown = {}, {}
  if type(opts) ~= 'table' then
    return nil, { 'setup() takes a table, got ' .. type(opts) }, unknown
  end
  for key, value in pairs(opts) do
    local option = M.schema[key]
    if not option then
      table.insert(unknown, tostring(key))
    elseif not type_ok(value, option.type) then
      table.insert(problems, string.format('`%s` must be %s, got %s', key, type_name(option.type), type(value)))
    end
  end
  if type(opts.cmd) == 'table' and (#opts.cmd == 0 or type(opts.cmd[1]) ~= 'string') then
    table.insert(problems, '`cmd` must be a non-empty list of strings, e.g. { "tandem", "lsp" }')
  end
  if type(opts.keymaps) == 'table' then
    for name, lhs in pairs(opts.keymaps) do
      if M.schema.keymaps.default[name] == nil then
        table.insert(unknown, 'keymaps.' .. tostring(name))
      elseif lhs ~= false and type(lhs) ~= 'string' then
        table.insert(problems, string.format('`keymaps.%s` must be a string or false, got %s', name, type(lhs)))
      end
    end
  end
  if type(opts.chat) == 'table' then
    for name, value in pairs(opts.chat) do
      local default = M.schema.chat.default[name]
      if default == nil then
        table.insert(unknown, 'chat.' .. tostring(name))
      elseif type(value) ~= type(default) then
        table.insert(problems, string.format('`chat.%s` must be a %s, got %s', name, type(default), type(value)))
      end
    end
  end
  table.sort(unknown)
  if #problems > 0 then
    return nil, problems, unknown
  end
  local config = M.defaults()
  for key, value in pairs(opts) do
    if M.schema[key] then
      if type(value) == 'table' and type(config[key]) == 'table' and not vim.islist(value) then
        config[key] = vim.tbl_deep_extend('force', config[key], value)
      else
        config[key] = value
      end
    end
  end
  if config.keymaps == true then
    config.keymaps = M.defaults().keymaps
  end
  return config, problems, unknown
end

--- The config in force (defaults until setup() runs).
M.current = M.defaults()

--- The keymap `name`, or nil when keymaps (or this one) are off.
function M.keymap(name)
  local maps = M.current.keymaps
  if type(maps) ~= 'table' then
    return nil
  end
  local lhs = maps[name]
  return lhs ~= false and lhs or nil
end

return M
