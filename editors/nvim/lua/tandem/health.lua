-- `:checkhealth tandem`: Neovim's version, the daemon binary and its
-- version, the configuration, and whether the model server answers; for
-- the rest (the model listed and streaming, the sandbox mechanism, the
-- config files, TANDEM_HOME) it points to `tandem doctor`.
local M = {}

local DEFAULT_BASE_URL = 'http://127.0.0.1:11434/v1'

--- The model server's base URL as the daemon will resolve it (the
--- plugin's layers first, then the environment, then the default).
local function base_url(config)
  local function from(layer)
    return type(layer) == 'table' and type(layer.model) == 'table' and layer.model.base_url or nil
  end
  return from(config.session_config) or from(config.init_options) or vim.env.TANDEM_BASE_URL or DEFAULT_BASE_URL
end

--- Whether something accepts TCP connections at `url`'s host and port.
local function reachable(url)
  local scheme, authority = url:match('^(%a+)://([^/]+)')
  if not authority then
    return false, 'not a URL'
  end
  local host, port = authority:match('^%[(.+)%]:?(%d*)$')
  if not host then
    host, port = authority:match('^([^:]+):?(%d*)$')
  end
  port = tonumber(port) or (scheme == 'https' and 443 or 80)
  local addrs = vim.uv.getaddrinfo(host, tostring(port), { socktype = 'stream' })
  if not addrs or not addrs[1] then
    return false, 'cannot resolve ' .. host
  end
  local tcp = assert(vim.uv.new_tcp())
  local done, ok, why = false, false, nil
  tcp:connect(addrs[1].addr, port, function(err)
    done, ok, why = true, err == nil, err
  end)
  vim.wait(2000, function()
    return done
  end, 10)
  if not tcp:is_closing() then
    tcp:close()
  end
  return ok, why or (done and '' or 'no answer within 2 s')
end

--- `tandem doctor` with the daemon program the plugin starts.
local function doctor_command(config)
  local program = type(config.cmd) == 'table' and config.cmd[1] or 'tandem'
  if program:find('%s') then
    program = vim.fn.shellescape(program)
  end
  return program .. ' doctor'
end

function M.check()
  local health = vim.health
  local tandem = require('tandem')
  local config = require('tandem.config').current

  health.start('tandem: Neovim')
  local v = vim.version()
  local version = string.format('%d.%d.%d', v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.11') == 1 then
    health.ok('Neovim ' .. version)
  else
    health.error('Neovim ' .. version .. ' is too old', { 'tandem needs Neovim 0.11 or newer' })
  end

  health.start('tandem: configuration')
  local problems, unknown = tandem.setup_problems()
  if not tandem.is_setup() then
    health.warn('setup() has not run', { "call require('tandem').setup({...}) in your init.lua" })
  elseif #problems > 0 then
    for _, p in ipairs(problems) do
      health.error('setup(): ' .. p)
    end
  else
    health.ok('setup() options are valid')
  end
  for _, key in ipairs(unknown) do
    health.warn('setup(): unknown option `' .. key .. '` (ignored)')
  end

  health.start('tandem: daemon')
  local program = config.cmd[1]
  if vim.fn.executable(program) ~= 1 then
    health.error(
      '`' .. program .. '` is not executable',
      { 'build tandem (cargo build --release) and set `cmd` to its path' }
    )
  else
    local result = vim.system({ program, '--version' }, { text = true }):wait(5000)
    if result.code == 0 then
      health.ok(string.format('%s (%s)', vim.trim(result.stdout or ''), vim.fn.exepath(program)))
    else
      health.error('`' .. program .. ' --version` failed: ' .. vim.trim((result.stderr or '') .. (result.stdout or '')))
    end
  end
  local client = require('tandem.client').get()
  if client then
    health.ok('running (client ' .. client.id .. ', root ' .. tostring(client.root_dir) .. ')')
    local sandbox = require('tandem.client').sandbox(client)
    if sandbox and sandbox.available == false then
      health.warn(tostring(sandbox.reason), { 'commands ask permission every time, even in auto mode' })
    elseif sandbox then
      local mechanism = type(sandbox.networkMechanism) == 'string' and (' (' .. sandbox.networkMechanism .. ')') or ''
      health.ok('exec sandbox: Landlock ABI ' .. tostring(sandbox.landlockAbi) .. ', network isolated' .. mechanism)
    end
  else
    health.info('not running yet (it starts with the first prompt)')
  end

  health.start('tandem: model server')
  local url = base_url(config)
  local ok, why = reachable(url)
  if ok then
    health.ok('model server reachable at ' .. url)
  else
    health.warn('model server not reachable at ' .. url .. (why ~= '' and (' (' .. why .. ')') or ''), {
      'start your model server, or set model.base_url in init_options, session_config or config.toml',
      'run `' .. doctor_command(config) .. '` for the details',
    })
  end

  require('tandem.mcp').check(health)
  health.start('tandem: doctor')
  health.info(
    'for the whole machine (the model listed and streaming, the sandbox mechanism, every config file, TANDEM_HOME), run `'
      .. doctor_command(config)
      .. '` in a terminal: it prints a fix for each problem'
  )
end

return M
